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

package rbacenv

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Install creates the account's namespaces, its ServiceAccount and the RBAC objects Load
// returned, then waits until the API server's authorizer allows one rule of every grant (it sees
// new bindings a moment after they are created).
func Install(ctx context.Context, c client.Client, a Account, objs []client.Object, grants []Grant) error {
	for _, ns := range []string{a.Namespace, a.ElectionNamespace} {
		if err := createOnce(ctx, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	if err := createOnce(ctx, c, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: a.Namespace, Name: a.Name}}); err != nil {
		return err
	}
	for _, o := range objs {
		if err := createOnce(ctx, c, o); err != nil {
			return err
		}
	}
	return WaitAuthorized(ctx, c, a, grants, 30*time.Second)
}

func createOnce(ctx context.Context, c client.Client, o client.Object) error {
	if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
	}
	return nil
}

// WaitAuthorized waits until a subject access review of the first entry of each grant is allowed
// for the account.
func WaitAuthorized(ctx context.Context, c client.Client, a Account, grants []Grant, timeout time.Duration) error {
	for _, gr := range grants {
		rule := gr.Rules[0]
		resource, sub, _ := strings.Cut(rule.Resources[0], "/")
		var last *authorizationv1.SubjectAccessReview
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			last = &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: a.User(), Groups: a.Groups(),
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: gr.Namespace, Verb: rule.Verbs[0],
					Group: rule.APIGroups[0], Resource: resource, Subresource: sub},
			}}
			if err := c.Create(ctx, last); err != nil {
				return false, err
			}
			return last.Status.Allowed, nil
		})
		if err != nil {
			return fmt.Errorf("%s is not in force for %s: %w (last review: %+v)", gr.Role, a.User(), err, last.Status)
		}
	}
	return nil
}

// Refusals records the requests the API server refused (403 Forbidden) to a client.
type Refusals struct {
	mu      sync.Mutex
	refused []string
}

// List returns the refused requests so far, as "METHOD path: status" lines.
func (r *Refusals) List() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.refused...)
}

// As returns a copy of cfg whose requests are made as the account (impersonation: cfg's user must
// be allowed to impersonate, as an envtest admin is) and whose refused requests are recorded in r.
func (r *Refusals) As(cfg *rest.Config, a Account) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Impersonate = rest.ImpersonationConfig{UserName: a.User(), Groups: a.Groups()}
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &refusalRecorder{next: rt, into: r} })
	return out
}

// refusalRecorder is the round tripper behind Refusals.As.
type refusalRecorder struct {
	next http.RoundTripper
	into *Refusals
}

func (t *refusalRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusForbidden {
		t.into.mu.Lock()
		t.into.refused = append(t.into.refused, fmt.Sprintf("%s %s: %s", req.Method, req.URL.Path, resp.Status))
		t.into.mu.Unlock()
	}
	return resp, err
}
