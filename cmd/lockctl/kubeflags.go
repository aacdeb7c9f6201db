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
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/lockwarden/lockwarden/pkg/lockclient"
)

// kubeFlags are kubectl's connection flags, which every command takes: --kubeconfig, --context,
// -n/--namespace, --server, --token, --as, ...
type kubeFlags struct {
	*genericclioptions.ConfigFlags
	// flags holds the flags, to tell which were given.
	flags *pflag.FlagSet
}

func newKubeFlags() *kubeFlags {
	k := &kubeFlags{ConfigFlags: genericclioptions.NewConfigFlags(true), flags: pflag.NewFlagSet("connection", pflag.ContinueOnError)}
	// Left out: a client-side request timeout would cut the long watches that wait for a lock;
	// lockctl keeps no discovery cache; impersonated user extras are for API server developers.
	k.Timeout, k.CacheDir, k.ImpersonateUserExtra = nil, nil, nil
	k.AddFlags(k.flags)
	k.flags.Lookup("namespace").Usage = "Namespace of the lock and claims (default: POD_NAMESPACE, else the kubeconfig context's, else the pod's)"
	k.flags.Lookup("kubeconfig").Usage = "Path to a kubeconfig (default: KUBECONFIG, else in-cluster, else ~/.kube/config)"
	k.flags.Lookup("as").Usage = "User to impersonate, e.g. system:serviceaccount:NS:NAME"
	return k
}

// namesConfig says whether KUBECONFIG or a flag other than the namespace and impersonation
// points at a kubeconfig or a server, so that lockctl in a pod does not use its in-cluster config.
func (k *kubeFlags) namesConfig(getenv func(string) string) bool {
	named := getenv("KUBECONFIG") != ""
	k.flags.VisitAll(func(f *pflag.Flag) {
		switch f.Name {
		case "namespace", "as", "as-uid", "as-group":
		default:
			named = named || f.Changed
		}
	})
	return named
}

// restConfig is the client config the flags ask for, and the namespace to work in. Unless
// KUBECONFIG or a flag names a kubeconfig or a server, lockctl in a pod uses the in-cluster config;
// otherwise it loads the kubeconfig as kubectl does (--kubeconfig, else KUBECONFIG, else
// ~/.kube/config) with the flags over it. The namespace is --namespace, else POD_NAMESPACE, else
// the kubeconfig context's, else the pod service account's, else default.
func (a *app) restConfig(k *kubeFlags) (*rest.Config, string, error) {
	loader := k.ToRawKubeConfigLoader()
	var cfg *rest.Config
	if !k.namesConfig(a.getenv) {
		if c, err := rest.InClusterConfig(); err == nil {
			cfg = c
			cfg.Impersonate = rest.ImpersonationConfig{UserName: *k.Impersonate, UID: *k.ImpersonateUID, Groups: *k.ImpersonateGroup}
		}
	}
	if cfg == nil {
		// kubectl falls back to localhost:8080 without a kubeconfig; lockctl says what is missing.
		raw, err := loader.RawConfig()
		if err == nil && len(raw.Clusters) == 0 && *k.APIServer == "" {
			err = clientcmd.ErrEmptyConfig
		}
		if err == nil {
			cfg, err = loader.ClientConfig()
		}
		if err != nil {
			return nil, "", fmt.Errorf("no Kubernetes config (run in a pod, or set --kubeconfig or KUBECONFIG): %w", err)
		}
	}
	cfg.UserAgent = "lockctl"

	ns := *k.Namespace
	if ns == "" {
		ns = a.getenv("POD_NAMESPACE")
	}
	if ns == "" {
		var err error
		if ns, _, err = loader.Namespace(); err != nil || ns == "" {
			ns = "default"
		}
	}
	return cfg, ns, nil
}

// connect returns a lockclient for the flags and the namespace to work in (restConfig).
func (a *app) connect(k *kubeFlags, opts ...lockclient.ClientOption) (*lockclient.Client, string, error) {
	cfg, ns, err := a.restConfig(k)
	if err != nil {
		return nil, "", err
	}
	c, err := lockclient.New(cfg, opts...)
	if err != nil {
		return nil, "", err
	}
	return c, ns, nil
}
