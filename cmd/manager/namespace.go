/*
Copyright 2026 The lockwarden Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// namespaceCheckTimeout bounds the start-up check, so that an API server that does not answer
// (a partition while a replica restarts) delays the start by no more than this and is left to
// the manager's own start to report. A healthy one answers in milliseconds.
const namespaceCheckTimeout = 5 * time.Second

// checkNamespaces fails when a namespace the manager writes to does not exist: --secret-namespace
// (the built-in backend's Leases, the Secrets LockBackends name) and, with --leader-elect,
// --leader-election-namespace. Outside a cluster (a kubeconfig, `make run`) the default
// lockwarden-system is easily missing, and the manager would otherwise start, log a reconciler
// error for every claim and grant nothing.
//
// r must read from the API server, not a cache. It lists namespaces by name, which the manager's
// ClusterRole grants (list, for LockBackends' namespaceSelector), rather than getting one, which
// it does not. Only a namespace found missing stops the start: a user who may not list
// namespaces, or an API server that does not answer, is left to the manager.
func checkNamespaces(ctx context.Context, r client.Reader, o options) error {
	type need struct{ namespace, flag, use string }
	needs := []need{{o.secretNamespace, "--secret-namespace", "the controller's Leases and the Secrets LockBackends name"}}
	if o.leaderElect && o.leaderElectionNS != o.secretNamespace {
		needs = append(needs, need{o.leaderElectionNS, "--leader-election-namespace", "the leader election Lease"})
	}
	ctx, cancel := context.WithTimeout(ctx, namespaceCheckTimeout)
	defer cancel()
	for _, n := range needs {
		var list corev1.NamespaceList
		err := r.List(ctx, &list, client.MatchingFields{"metadata.name": n.namespace})
		switch {
		case err != nil:
			ctrl.LoggerFrom(ctx).Info("Cannot check that the namespace exists; starting anyway",
				"namespace", n.namespace, "flag", n.flag, "reason", apierrors.ReasonForError(err), "error", err.Error())
		case len(list.Items) == 0:
			return fmt.Errorf("namespace %q does not exist (%s: %s); create it with `kubectl create namespace %s`, or name an existing namespace with %s",
				n.namespace, n.flag, n.use, n.namespace, n.flag)
		}
	}
	return nil
}
