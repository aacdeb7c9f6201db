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

package registry_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/backends"
	"github.com/lockwarden/lockwarden/internal/backends/fake"
	"github.com/lockwarden/lockwarden/internal/backends/registry"
)

func redisBackend(name string, generation int64) *locksv1alpha1.LockBackend {
	return &locksv1alpha1.LockBackend{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Generation: generation},
		Spec: locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendRedis,
			Redis: &locksv1alpha1.RedisBackend{Address: "redis:6379"}},
	}
}

func TestSessionsAreReusedUntilTheSpecChanges(t *testing.T) {
	ctx := context.Background()
	builtin := fake.New()
	opened := 0
	reg := registry.New(builtin, registry.WithFactory(locksv1alpha1.BackendRedis,
		func(context.Context, locksv1alpha1.LockBackendSpec, registry.SecretReader) (backends.Backend, error) {
			opened++
			return builtin.NewSession(), nil
		}))

	if b, err := reg.For(ctx, nil); err != nil || b != backends.Backend(builtin) {
		t.Fatalf("For(nil) = %v, %v; want the built-in backend", b, err)
	}
	k := &locksv1alpha1.LockBackend{Spec: locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendKubernetes}}
	if b, _ := reg.For(ctx, k); b != backends.Backend(builtin) {
		t.Fatalf("a LockBackend of type Kubernetes must get the built-in backend")
	}

	first, err := reg.For(ctx, redisBackend("r", 1))
	if err != nil {
		t.Fatal(err)
	}
	again, _ := reg.For(ctx, redisBackend("r", 1))
	if first != again || opened != 1 {
		t.Fatalf("same generation: want the same session and one open, got opened=%d", opened)
	}
	retired := 0
	reg.OnRetire(func() { retired++ })
	changed, _ := reg.For(ctx, redisBackend("r", 2))
	if changed == first || opened != 2 || retired != 1 {
		t.Fatalf("new generation: want a new session and the old one retired, got opened=%d retired=%d", opened, retired)
	}
	// The old session stays open while holds live on it, and closes once none does.
	reg.CloseRetired(ctx, func(b backends.Backend) bool { return b == first })
	if err := first.Ping(ctx); err != nil {
		t.Fatalf("a retired session that holds still live on must stay open: %v", err)
	}
	reg.CloseRetired(ctx, func(backends.Backend) bool { return false })
	if err := first.Ping(ctx); err == nil {
		t.Fatalf("a retired session nothing lives on should have been closed")
	}
	if err := changed.Ping(ctx); err != nil {
		t.Fatalf("the current session must never be closed by CloseRetired: %v", err)
	}
}

func TestAnEditThatCannotBeOpenedLeavesTheOldSessionServing(t *testing.T) {
	ctx := context.Background()
	builtin := fake.New()
	broken := false
	reg := registry.New(builtin, registry.WithFactory(locksv1alpha1.BackendRedis,
		func(context.Context, locksv1alpha1.LockBackendSpec, registry.SecretReader) (backends.Backend, error) {
			if broken {
				return nil, errors.New("redis: TLS handshake failed")
			}
			return builtin.NewSession(), nil
		}))
	first, err := reg.For(ctx, redisBackend("r", 1))
	if err != nil {
		t.Fatal(err)
	}
	broken = true
	if _, err := reg.For(ctx, redisBackend("r", 2)); err == nil {
		t.Fatalf("For must report that the edited spec cannot be opened")
	}
	if got := reg.Serving("r"); got != first {
		t.Fatalf("Serving = %v, want the session of the spec before the edit", got)
	}
	if err := first.Ping(ctx); err != nil {
		t.Fatalf("the old session must stay open: %v", err)
	}
	broken = false
	if b, err := reg.For(ctx, redisBackend("r", 2)); err != nil || b == first {
		t.Fatalf("once the spec can be opened, For = %v, %v; want a new session", b, err)
	}
}

func TestARotatedSecretOpensANewSession(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "lockwarden-system", Name: "redis"},
		Data: map[string][]byte{"password": []byte("first")}}
	c := fakeclient.NewClientBuilder().WithScheme(scheme).WithObjects(secret).Build()
	builtin := fake.New()
	var passwords []string
	reg := registry.New(builtin,
		registry.WithSecrets(registry.NamespacedSecrets{Reader: c, Namespace: "lockwarden-system"}),
		registry.WithFactory(locksv1alpha1.BackendRedis,
			func(ctx context.Context, spec locksv1alpha1.LockBackendSpec, secrets registry.SecretReader) (backends.Backend, error) {
				pw, err := secrets.Read(ctx, *spec.Redis.PasswordSecretRef)
				if err != nil {
					return nil, err
				}
				passwords = append(passwords, string(pw))
				return builtin.NewSession(), nil
			}))
	lb := redisBackend("r", 1)
	lb.Spec.Redis.PasswordSecretRef = &locksv1alpha1.SecretKeySelector{
		SecretReference: locksv1alpha1.SecretReference{Name: "redis", Namespace: "lockwarden-system"}, Key: "password"}
	first, err := reg.For(ctx, lb)
	if err != nil {
		t.Fatal(err)
	}
	if reg.Refresh(ctx, lb) {
		t.Fatalf("Refresh reported a change while the Secret is unchanged")
	}
	secret.Data["password"] = []byte("rotated")
	if err := c.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if !reg.Refresh(ctx, lb) {
		t.Fatalf("Refresh did not notice the rotated password")
	}
	second, err := reg.For(ctx, lb)
	if err != nil || second == first {
		t.Fatalf("after a rotation For = %v, %v; want a new session", second, err)
	}
	if strings.Join(passwords, ",") != "first,rotated" {
		t.Fatalf("sessions opened with %v, want first then rotated", passwords)
	}
	if again, _ := reg.For(ctx, lb); again != second {
		t.Fatalf("the new session must be reused until something changes again")
	}

	if err := c.Delete(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if reg.Refresh(ctx, lb) {
		t.Fatalf("a Secret that cannot be read must not replace a working session")
	}
}

func TestTypesWithoutAFactoryAreReported(t *testing.T) {
	reg := registry.New(fake.New())
	lb := &locksv1alpha1.LockBackend{ObjectMeta: metav1.ObjectMeta{Name: "z"},
		Spec: locksv1alpha1.LockBackendSpec{Type: locksv1alpha1.BackendZooKeeper}}
	_, err := reg.For(context.Background(), lb)
	if err == nil || err.Error() != "backend type ZooKeeper is not supported by this build of lockwarden" {
		t.Fatalf("err = %v", err)
	}
}

func TestSecretsAreReadOnlyInTheControllerNamespace(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	c := fakeclient.NewClientBuilder().WithScheme(scheme).WithObjects(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "lockwarden-system", Name: "redis"},
			Data: map[string][]byte{"password": []byte("s3cret")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "redis"},
			Data: map[string][]byte{"password": []byte("theirs")}},
	).Build()
	secrets := registry.NamespacedSecrets{Reader: c, Namespace: "lockwarden-system"}
	ref := func(ns, name, key string) locksv1alpha1.SecretKeySelector {
		return locksv1alpha1.SecretKeySelector{SecretReference: locksv1alpha1.SecretReference{Name: name, Namespace: ns}, Key: key}
	}
	ctx := context.Background()

	if v, err := secrets.Read(ctx, ref("lockwarden-system", "redis", "password")); err != nil || string(v) != "s3cret" {
		t.Fatalf("Read = %q, %v", v, err)
	}
	for _, tc := range []struct {
		ref  locksv1alpha1.SecretKeySelector
		want string
	}{
		{ref("team-a", "redis", "password"), `secret unavailable: Secret team-a/redis is outside the controller's Secret namespace "lockwarden-system"; move it there`},
		{ref("lockwarden-system", "missing", "password"), "secret unavailable: Secret lockwarden-system/missing not found"},
		{ref("lockwarden-system", "redis", "pass"), `secret unavailable: Secret lockwarden-system/redis has no key "pass"`},
	} {
		_, err := secrets.Read(ctx, tc.ref)
		if err == nil || err.Error() != tc.want || !errors.Is(err, registry.ErrSecret) {
			t.Errorf("Read(%+v) = %v, want %q", tc.ref, err, tc.want)
		}
		if err != nil && (strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "theirs")) {
			t.Errorf("error leaks a secret value: %v", err)
		}
	}
}
