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

package reliability

import (
	"bytes"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

func TestRegistryKeys(t *testing.T) {
	if got, want := registryLocksPrefix("ns1"), "/registry/locks.lockwarden.io/distributedlocks/ns1/"; got != want {
		t.Errorf("registryLocksPrefix = %q, want %q", got, want)
	}
	if got, want := registryLocksPrefix(""), "/registry/locks.lockwarden.io/distributedlocks/"; got != want {
		t.Errorf("registryLocksPrefix(\"\") = %q, want %q", got, want)
	}
	if got, want := registryLeaseKey("sys", "s"), "/registry/leases/sys/s"; got != want {
		t.Errorf("registryLeaseKey = %q, want %q", got, want)
	}
}

func TestDecodeLockRecord(t *testing.T) {
	stored := []byte(`{"apiVersion":"locks.lockwarden.io/v1alpha1","kind":"DistributedLock",` +
		`"metadata":{"name":"l","namespace":"ns1"},"spec":{"leaseDurationSeconds":5},` +
		`"status":{"holders":[{"claim":"c1","identity":"ns1/c1"}],"fencingToken":7}}`)
	l, err := decodeLockRecord(stored)
	if err != nil {
		t.Fatal(err)
	}
	if hs := l.Status.CurrentHolders(); l.Name != "l" || l.Spec.LeaseDurationSeconds != 5 || len(hs) != 1 || hs[0].Identity != "ns1/c1" {
		t.Errorf("decoded %s/%s ttl %d holders %+v", l.Namespace, l.Name, l.Spec.LeaseDurationSeconds, hs)
	}
	for name, bad := range map[string][]byte{
		"not JSON":   []byte("k8s\x00..."),
		"wrong kind": []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"l"}}`),
	} {
		if _, err := decodeLockRecord(bad); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}

// TestLeaseDecoder stores a Lease the way the API server does (protobuf behind its magic prefix)
// and reads it back.
func TestLeaseDecoder(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	renewed := metav1.NewMicroTime(time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC))
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "sys", Annotations: map[string]string{"a": "b"}},
		Spec:       coordinationv1.LeaseSpec{RenewTime: &renewed},
	}
	encoder := serializer.NewCodecFactory(scheme).EncoderForVersion(protobuf.NewSerializer(scheme, scheme), coordinationv1.SchemeGroupVersion)
	var buf bytes.Buffer
	if err := encoder.Encode(lease, &buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(buf.Bytes(), []byte("k8s\x00")) {
		t.Fatalf("encoded Lease lacks the protobuf magic: %q", buf.Bytes()[:8])
	}
	d := newLeaseDecoder(scheme)
	got, err := d.decode(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "s" || got.Annotations["a"] != "b" || !got.Spec.RenewTime.Equal(&renewed) {
		t.Errorf("decoded %+v", got)
	}
	if _, err := d.decode([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"s"}}`)); err == nil {
		t.Error("a ConfigMap decoded as a Lease")
	}
}

func TestDecodeClaimRecord(t *testing.T) {
	stored := []byte(`{"apiVersion":"locks.lockwarden.io/v1alpha1","kind":"LockClaim",` +
		`"metadata":{"name":"c1","namespace":"ns1"},"spec":{"lockName":"l"}}`)
	c, err := decodeClaimRecord(stored, 42)
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "c1" || c.Spec.LockName != "l" || c.ResourceVersion != "42" {
		t.Errorf("decoded %s lock %q resourceVersion %q, want c1, l, 42", c.Name, c.Spec.LockName, c.ResourceVersion)
	}
	if got, want := registryClaimsPrefix("ns1"), "/registry/locks.lockwarden.io/lockclaims/ns1/"; got != want {
		t.Errorf("registryClaimsPrefix = %q, want %q", got, want)
	}
	if _, err := decodeClaimRecord([]byte(`{"kind":"DistributedLock"}`), 1); err == nil {
		t.Error("a DistributedLock decoded as a LockClaim")
	}
}
