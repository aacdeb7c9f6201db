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

package v1alpha1_test

import (
	"errors"
	"fmt"
	"regexp"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// manifest turns YAML, written as a user would, into an object in namespace ns (cluster-scoped
// kinds ignore it). A name is generated when the YAML has none.
func manifest(ns, text string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	Expect(yaml.Unmarshal([]byte(text), &obj.Object)).To(Succeed())
	if obj.GetKind() != "LockBackend" {
		obj.SetNamespace(ns)
	}
	if obj.GetName() == "" {
		obj.SetGenerateName("v-")
	}
	return obj
}

// causes lists an Invalid error's field errors as "<field>: <message>", the way kubectl shows
// them. It fails the test if err is not an Invalid error from the API server.
func causes(err error) []string {
	GinkgoHelper()
	Expect(err).To(HaveOccurred(), "the API server accepted an invalid object")
	var status apierrors.APIStatus
	Expect(errors.As(err, &status)).To(BeTrue(), "not an API error: %v", err)
	Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got: %v", err)
	var out []string
	for _, c := range status.Status().Details.Causes {
		// The server adds this notice whenever a schema error kept it from running the CEL rules;
		// it is not one of the object's errors (1.32 quotes the null, later releases do not).
		if notChecked.MatchString(c.Message) {
			continue
		}
		out = append(out, canonical(fmt.Sprintf("%s: %s", c.Field, c.Message)))
	}
	return out
}

var notChecked = regexp.MustCompile(`^Invalid value: "?null"?: some validation rules were not checked`)

// causesOf is the expected side of causes: want, in the form the server under test can show.
func causesOf(want ...string) []string {
	out := make([]string, len(want))
	for i, w := range want {
		out[i] = canonical(w)
	}
	return out
}

// valuesByType is set when the API server names the type of a value that broke a CEL rule
// ("Invalid value: \"string\"") instead of showing the value, as releases before 1.37 do (1.32
// does; make test-compat runs this suite there). The field and the message are then compared and
// the value is not; on 1.37 and later every part is compared.
var valuesByType bool

// invalidValue is the value part of a field error: a quoted value, a number (an integer field's)
// or none (an object's rule).
var invalidValue = regexp.MustCompile(`Invalid value: (?:"(?:[^"\\]|\\.)*": |-?[0-9]+: )?`)

func canonical(cause string) string {
	if !valuesByType {
		return cause
	}
	return invalidValue.ReplaceAllString(cause, "")
}

// hostPortError is the field error for a malformed host:port value.
func hostPortError(field, value string) string {
	return fmt.Sprintf("%s: Invalid value: %q: %s", field, value, hostPortMessage)
}

const (
	hostPortMessage = "must be host:port with a port from 1 to 65535, e.g. redis.infra.svc:6379, 10.0.0.7:6379 or [fd00::7]:6379"
	lockNameMessage = "lockName must be the name of a DistributedLock: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"
)

var _ = Describe("Objects the API server refuses on create", func() {
	DescribeTable("each broken rule gets a message that says what to fix",
		func(text string, want ...string) {
			ns := newNamespace()
			err := k8sClient.Create(ctx, manifest(ns, text))
			Expect(causes(err)).To(ConsistOf(causesOf(want...)))
		},

		// LockClaim
		Entry("a claim without lockName", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockClaim
spec:
  holder: {podName: web-0}
`, `spec: Invalid value: set exactly one of lockName (one lock) and lockNames (2 to 8 locks held together)`),
		Entry("a claim with both lockName and lockNames", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockClaim
spec:
  lockName: db
  lockNames: [db, cache]
`, `spec: Invalid value: set exactly one of lockName (one lock) and lockNames (2 to 8 locks held together)`),
		Entry("a claim with one name in lockNames", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockClaim
spec:
  lockNames: [db]
`, `spec.lockNames: Invalid value: 1: spec.lockNames in body should have at least 2 items`),
		Entry("a claim with nine names in lockNames", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockClaim
spec:
  lockNames: [a, b, c, d, e, f, g, h, i]
`, `spec.lockNames: Too many: 9: must have at most 8 items`),
		Entry("a claim that names one lock twice", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockClaim
spec:
  lockNames: [db, db]
`, `spec.lockNames[1]: Duplicate value: "db"`),
		Entry("a claim whose lockNames are not object names", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockClaim
spec:
  lockNames: [db, Staging_Cluster]
`, `spec.lockNames: Invalid value: lockNames must be names of DistributedLocks: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit`),
		Entry("a claim whose lockName is not an object name", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockClaim
spec:
  lockName: Nightly_Migration
`, `spec.lockName: Invalid value: "Nightly_Migration": `+lockNameMessage),
		Entry("a claim whose podName is not a pod name", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockClaim
spec:
  lockName: db
  holder: {podName: "web 0"}
`, `spec.holder.podName: Invalid value: "web 0": podName must be a pod name: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit`),
		Entry("a claim whose leaseName is not a Lease name", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockClaim
spec:
  lockName: db
  holder: {leaseName: "Beat_1"}
`, `spec.holder.leaseName: Invalid value: "Beat_1": leaseName must be a Lease name: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit`),
		Entry("a claim with both a holder pod and a heartbeat Lease", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockClaim
spec:
  lockName: db
  holder: {podName: web-0, leaseName: web-0-beat}
`, `spec.holder: Invalid value: holder.podName and holder.leaseName cannot both be set: a pod's own liveness is its heartbeat`),
		Entry("a claim with both a holder pod and a holder object", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockClaim
spec:
  lockName: db
  holder: {podName: web-0, object: {apiVersion: batch/v1, kind: Job, name: migrate}}
`, `spec.holder: Invalid value: holder.object cannot be set with holder.podName or holder.leaseName: a claim has one holder`),
		Entry("a claim with both a heartbeat Lease and a holder object", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockClaim
spec:
  lockName: db
  holder: {leaseName: beat, object: {apiVersion: batch/v1, kind: Job, name: migrate}}
`, `spec.holder: Invalid value: holder.object cannot be set with holder.podName or holder.leaseName: a claim has one holder`),
		Entry("a claim whose holder object names a resource, not a kind", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockClaim
spec:
  lockName: db
  holder: {object: {apiVersion: batch/v1, kind: jobs, name: migrate}}
`, `spec.holder.object.kind: Invalid value: "jobs": kind must be a Kubernetes kind: letters and digits, starting with a capital (Job, PipelineRun, Workflow)`),
		Entry("a claim whose holder object's name is not an object name", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockClaim
spec:
  lockName: db
  holder: {object: {apiVersion: batch/v1, kind: Job, name: Migrate_1}}
`, `spec.holder.object.name: Invalid value: "Migrate_1": object.name must be an object name: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit`),
		Entry("a claim with a negative wait timeout", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockClaim
spec:
  lockName: db
  waitTimeoutSeconds: -1
`, `spec.waitTimeoutSeconds: Invalid value: -1: spec.waitTimeoutSeconds in body should be greater than or equal to 0`),

		// DistributedLock
		Entry("a lease shorter than 5 seconds", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: DistributedLock
spec:
  leaseDurationSeconds: 4
`, `spec.leaseDurationSeconds: Invalid value: 4: spec.leaseDurationSeconds in body should be greater than or equal to 5`),
		Entry("a lease longer than an hour", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: DistributedLock
spec:
  leaseDurationSeconds: 3601
`, `spec.leaseDurationSeconds: Invalid value: 3601: spec.leaseDurationSeconds in body should be less than or equal to 3600`),
		Entry("a negative lock delay", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: DistributedLock
spec:
  lockDelaySeconds: -1
`, `spec.lockDelaySeconds: Invalid value: -1: spec.lockDelaySeconds in body should be greater than or equal to 0`),
		Entry("a lock delay longer than an hour", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: DistributedLock
spec:
  lockDelaySeconds: 3601
`, `spec.lockDelaySeconds: Invalid value: 3601: spec.lockDelaySeconds in body should be less than or equal to 3600`),
		Entry("a negative node loss limit", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: DistributedLock
spec:
  holderNodeLossSeconds: -1
`, `spec.holderNodeLossSeconds: Invalid value: -1: spec.holderNodeLossSeconds in body should be greater than or equal to 0`),
		Entry("a node loss limit longer than an hour", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: DistributedLock
spec:
  holderNodeLossSeconds: 3601
`, `spec.holderNodeLossSeconds: Invalid value: 3601: spec.holderNodeLossSeconds in body should be less than or equal to 3600`),
		Entry("a lock without places", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: DistributedLock
spec:
  maxHolders: 0
`, `spec.maxHolders: Invalid value: 0: spec.maxHolders in body should be greater than or equal to 1`),
		Entry("a lock of more than 1000 places", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: DistributedLock
spec:
  maxHolders: 1001
`, `spec.maxHolders: Invalid value: 1001: spec.maxHolders in body should be less than or equal to 1000`),
		Entry("a lock whose queue holds nobody", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: DistributedLock
spec:
  maxQueue: 0
`, `spec.maxQueue: Invalid value: 0: spec.maxQueue in body should be greater than or equal to 1`),
		Entry("a lock whose queue holds more than 100000", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: DistributedLock
spec:
  maxQueue: 100001
`, `spec.maxQueue: Invalid value: 100001: spec.maxQueue in body should be less than or equal to 100000`),
		Entry("an unknown claim mode", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockClaim
spec:
  lockName: db
  mode: Reader
`, `spec.mode: Unsupported value: "Reader": supported values: "Shared", "Exclusive"`),
		Entry("an unknown loss policy", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: DistributedLock
spec:
  lossPolicy: Kill
`, `spec.lossPolicy: Unsupported value: "Kill": supported values: "Notify", "Evict"`),
		Entry("a key with a space", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: DistributedLock
spec:
  key: "jobs nightly"
`, `spec.key: Invalid value: "jobs nightly": key must be printable ASCII without spaces`),

		// LockBackend: key policy
		Entry("an unknown key policy", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockBackend
spec:
  type: Redis
  redis: {address: "redis:6379"}
  keyPolicy: Shared
`, `spec.keyPolicy: Unsupported value: "Shared": supported values: "Namespaced", "Verbatim"`),
		Entry("keyPolicy Verbatim on type Kubernetes", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockBackend
spec:
  type: Kubernetes
  keyPolicy: Verbatim
`, `spec: Invalid value: keyPolicy must be Namespaced for type Kubernetes: lock records of the Kubernetes API always stay in their namespace`),

		// LockBackend: type and union
		Entry("an unknown backend type", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockBackend
spec:
  type: Consul
`, `spec.type: Unsupported value: "Consul": supported values: "Kubernetes", "Redis", "Redlock", "Etcd", "ZooKeeper", "SQL"`),
		Entry("type Redis with the etcd member instead of redis", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockBackend
spec:
  type: Redis
  etcd: {endpoints: ["etcd:2379"]}
`, `spec: Invalid value: spec.redis must be set when type is Redis and only then`,
			`spec: Invalid value: spec.etcd must be set when type is Etcd and only then`),
		Entry("type Kubernetes with a redis member", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockBackend
spec:
  type: Kubernetes
  redis: {address: "redis:6379"}
`, `spec: Invalid value: spec.redis must be set when type is Redis and only then`),
		Entry("type SQL without its member", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockBackend
spec:
  type: SQL
`, `spec: Invalid value: spec.sql must be set when type is SQL and only then`),
		Entry("the reserved name kubernetes with another type", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockBackend
metadata: {name: kubernetes}
spec:
  type: Redis
  redis: {address: "redis:6379"}
`, `<nil>: Invalid value: the name kubernetes is reserved for the built-in backend and may only have type Kubernetes`),

		// LockBackend: Redlock node counts
		Entry("redlock with one node", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockBackend
spec:
  type: Redlock
  redlock: {addresses: ["r0:6379"]}
`, `spec.redlock.addresses: Invalid value: redlock needs at least 3 independent Redis nodes; use type Redis for a single server`),
		Entry("redlock with two nodes", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockBackend
spec:
  type: Redlock
  redlock: {addresses: ["r0:6379", "r1:6379"]}
`, `spec.redlock.addresses: Invalid value: redlock needs at least 3 independent Redis nodes; use type Redis for a single server`,
			`spec.redlock.addresses: Invalid value: redlock needs an odd number of Redis nodes so that a majority is unambiguous`),
		Entry("redlock with four nodes", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockBackend
spec:
  type: Redlock
  redlock: {addresses: ["r0:6379", "r1:6379", "r2:6379", "r3:6379"]}
`, `spec.redlock.addresses: Invalid value: redlock needs an odd number of Redis nodes so that a majority is unambiguous`),
		Entry("redlock with the same node twice", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockBackend
spec:
  type: Redlock
  redlock: {addresses: ["r0:6379", "r1:6379", "r0:6379"]}
`, `spec.redlock.addresses[2]: Duplicate value: "r0:6379"`),

		// LockBackend: malformed addresses
		Entry("a redis address without a port", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockBackend
spec:
  type: Redis
  redis: {address: "redis.infra.svc"}
`, hostPortError("spec.redis.address", "redis.infra.svc")),
		Entry("a redis address given as a URL", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockBackend
spec:
  type: Redis
  redis: {address: "redis://redis:6379"}
`, hostPortError("spec.redis.address", "redis://redis:6379")),
		Entry("a redis address with port 0", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockBackend
spec:
  type: Redis
  redis: {address: "redis:0"}
`, hostPortError("spec.redis.address", "redis:0")),
		Entry("a redis address with a port above 65535", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockBackend
spec:
  type: Redis
  redis: {address: "redis:65536"}
`, hostPortError("spec.redis.address", "redis:65536")),
		Entry("an unbracketed IPv6 redis address", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockBackend
spec:
  type: Redis
  redis: {address: "fd00::7:6379"}
`, hostPortError("spec.redis.address", "fd00::7:6379")),
		Entry("a malformed redlock node", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockBackend
spec:
  type: Redlock
  redlock: {addresses: ["r0:6379", "r1", "r2:6379"]}
`, hostPortError("spec.redlock.addresses[1]", "r1")),
		Entry("an etcd endpoint with another scheme", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockBackend
spec:
  type: Etcd
  etcd: {endpoints: ["unix://etcd:2379"]}
`, `spec.etcd.endpoints[0]: Invalid value: "unix://etcd:2379": must be an etcd client URL such as https://etcd-0.etcd:2379 or a host:port with a port from 1 to 65535`),
		Entry("etcd without endpoints", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockBackend
spec:
  type: Etcd
  etcd: {endpoints: []}
`, `spec.etcd.endpoints: Invalid value: 0: spec.etcd.endpoints in body should have at least 1 items`),
		Entry("a malformed zookeeper server", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockBackend
spec:
  type: ZooKeeper
  zookeeper: {servers: ["zk-0:2181", "zk-1:two"]}
`, hostPortError("spec.zookeeper.servers[1]", "zk-1:two")),
		Entry("a zookeeper session timeout of one second", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockBackend
spec:
  type: ZooKeeper
  zookeeper: {servers: ["zk-0:2181"], sessionTimeoutSeconds: 1}
`, `spec.zookeeper.sessionTimeoutSeconds: Invalid value: 1: spec.zookeeper.sessionTimeoutSeconds in body should be greater than or equal to 2`),

		// LockBackend: SQL and Secrets
		Entry("an unknown SQL driver", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockBackend
spec:
  type: SQL
  sql:
    driver: sqlite
    dsnSecretRef: {name: db, namespace: lockwarden-system, key: dsn}
`, `spec.sql.driver: Unsupported value: "sqlite": supported values: "postgres", "mysql"`),
		Entry("a SQL table name that is not an identifier", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockBackend
spec:
  type: SQL
  sql:
    driver: postgres
    table: "locks; drop table users"
    dsnSecretRef: {name: db, namespace: lockwarden-system, key: dsn}
`, `spec.sql.table: Invalid value: "locks; drop table users": table must be a plain SQL identifier: letters, digits and underscores, not starting with a digit`),
		Entry("a SQL table name too long for its sessions table", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockBackend
spec:
  type: SQL
  sql:
    driver: postgres
    table: lockwarden_locks_for_the_payments_team_in_the_eu_west_1
    dsnSecretRef: {name: db, namespace: lockwarden-system, key: dsn}
`, `spec.sql.table: Invalid value: "lockwarden_locks_for_the_payments_team_in_the_eu_west_1": table may have at most 54 characters: lockwarden also creates <table>_sessions, and SQL identifiers have at most 63`),
		Entry("a Secret reference without a namespace", `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockBackend
spec:
  type: SQL
  sql:
    driver: mysql
    dsnSecretRef: {name: db, key: dsn}
`, `spec.sql.dsnSecretRef.namespace: Required value`),
	)
})

var _ = Describe("Changes the API server refuses on update", func() {
	// update creates the object from text, applies change to it and returns the update's error.
	update := func(text string, change func(obj *unstructured.Unstructured)) error {
		obj := manifest(newNamespace(), text)
		Expect(k8sClient.Create(ctx, obj)).To(Succeed())
		DeferCleanup(func() { _ = k8sClient.Delete(ctx, obj) })
		change(obj)
		return k8sClient.Update(ctx, obj)
	}
	set := func(value any, path ...string) func(*unstructured.Unstructured) {
		return func(obj *unstructured.Unstructured) {
			Expect(unstructured.SetNestedField(obj.Object, value, path...)).To(Succeed())
		}
	}
	remove := func(path ...string) func(*unstructured.Unstructured) {
		return func(obj *unstructured.Unstructured) { unstructured.RemoveNestedField(obj.Object, path...) }
	}

	const claim = `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockClaim
spec:
  lockName: db
  holder: {podName: web-0, identity: web-0-uid}
`
	const detachedClaim = `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockClaim
spec:
  lockName: db
`
	const multiClaim = `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockClaim
spec:
  lockNames: [staging, test-cluster]
`
	const heartbeatClaim = `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockClaim
spec:
  lockName: db
  holder: {leaseName: job-beat}
`
	const objectClaim = `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockClaim
spec:
  lockName: db
  holder: {object: {apiVersion: batch/v1, kind: Job, name: migrate}}
`
	const lock = `
apiVersion: locks.lockwarden.io/v1alpha1
kind: DistributedLock
spec:
  key: jobs/nightly
`
	const defaultLock = `
apiVersion: locks.lockwarden.io/v1alpha1
kind: DistributedLock
`
	const backend = `
apiVersion: locks.lockwarden.io/v1alpha1
kind: LockBackend
spec:
  type: Redis
  redis: {address: "redis:6379"}
`
	const (
		lockNameImmutable  = `spec.lockName: Invalid value: "other": lockName is immutable; create a new LockClaim for another lock`
		podNameImmutable   = "holder.podName is immutable; create a new LockClaim for another pod"
		leaseNameImmutable = "holder.leaseName is immutable; create a new LockClaim for another heartbeat"
		identityImmutable  = "holder.identity is immutable; create a new LockClaim instead"
		objectImmutable    = "holder.object is immutable; create a new LockClaim for another object"
		keyImmutable       = "key is immutable; create a new DistributedLock to use another key"
		backendImmutable   = `spec.backendRef: Invalid value: backendRef is immutable; create a new DistributedLock to use another backend`
	)

	DescribeTable("immutable fields stay as created",
		func(text string, change func(*unstructured.Unstructured), want ...string) {
			Expect(causes(update(text, change))).To(ConsistOf(causesOf(want...)))
		},
		Entry("a claim's lockName", claim, set("other", "spec", "lockName"), lockNameImmutable),
		Entry("a claim's holder pod", claim, set("web-1", "spec", "holder", "podName"),
			`spec.holder.podName: Invalid value: "web-1": `+podNameImmutable),
		Entry("a claim's holder pod removed", claim, remove("spec", "holder", "podName"),
			`spec: Invalid value: `+podNameImmutable),
		Entry("a holder pod added to a detached claim", detachedClaim, set("web-0", "spec", "holder", "podName"),
			`spec: Invalid value: `+podNameImmutable),
		Entry("a claim's heartbeat Lease", heartbeatClaim, set("other-beat", "spec", "holder", "leaseName"),
			`spec.holder.leaseName: Invalid value: "other-beat": `+leaseNameImmutable),
		Entry("a claim's heartbeat Lease removed", heartbeatClaim, remove("spec", "holder", "leaseName"),
			`spec: Invalid value: `+leaseNameImmutable),
		Entry("a heartbeat Lease added to a detached claim", detachedClaim, set("job-beat", "spec", "holder", "leaseName"),
			`spec: Invalid value: `+leaseNameImmutable),
		Entry("a claim's holder object", objectClaim, set("other", "spec", "holder", "object", "name"),
			`spec.holder.object: Invalid value: `+objectImmutable),
		Entry("a claim's holder object removed", objectClaim, remove("spec", "holder", "object"),
			`spec: Invalid value: `+objectImmutable),
		Entry("a holder object added to a detached claim", detachedClaim, set(map[string]any{"apiVersion": "batch/v1", "kind": "Job", "name": "migrate"}, "spec", "holder", "object"),
			`spec: Invalid value: `+objectImmutable),
		Entry("a claim's holder identity", claim, set("someone-else", "spec", "holder", "identity"),
			`spec.holder.identity: Invalid value: "someone-else": `+identityImmutable),
		Entry("a claim's mode", claim, set("Exclusive", "spec", "mode"),
			`spec.mode: Invalid value: "Exclusive": mode is immutable; create a new LockClaim to hold the lock in another mode`),
		Entry("a claim's lockNames", multiClaim, set([]any{"staging", "prod"}, "spec", "lockNames"),
			`spec.lockNames: Invalid value: lockNames is immutable; create a new LockClaim for other locks`),
		Entry("one lock of a claim turned into several", detachedClaim, func(obj *unstructured.Unstructured) {
			remove("spec", "lockName")(obj)
			set([]any{"db", "cache"}, "spec", "lockNames")(obj)
		}, `spec: Invalid value: lockNames is immutable; create a new LockClaim for other locks`),
		Entry("a claim's priority", claim, set(int64(10), "spec", "priority"),
			`spec.priority: Invalid value: 10: priority is immutable; create a new LockClaim to wait at another priority`),
		Entry("a claim's priority, from the default", detachedClaim, set(int64(-1), "spec", "priority"),
			`spec.priority: Invalid value: -1: priority is immutable; create a new LockClaim to wait at another priority`),
		Entry("a lock's key", lock, set("jobs/weekly", "spec", "key"),
			`spec.key: Invalid value: "jobs/weekly": `+keyImmutable),
		Entry("a key added to a lock created without one", defaultLock, set("jobs/weekly", "spec", "key"),
			`spec: Invalid value: `+keyImmutable),
		Entry("a key removed from a lock", lock, remove("spec", "key"),
			`spec: Invalid value: `+keyImmutable),
		Entry("a lock's backend", defaultLock, set("redis-main", "spec", "backendRef", "name"), backendImmutable),
		Entry("a backend's type", backend, func(obj *unstructured.Unstructured) {
			set("Etcd", "spec", "type")(obj)
			remove("spec", "redis")(obj)
			set([]any{"etcd:2379"}, "spec", "etcd", "endpoints")(obj)
		}, `spec.type: Invalid value: "Etcd": type is immutable; create a new LockBackend instead`),
		Entry("a backend's key policy", backend, set("Verbatim", "spec", "keyPolicy"),
			`spec.keyPolicy: Invalid value: "Verbatim": keyPolicy is immutable: it would move the keys of held locks; create a new LockBackend instead`),
	)

	It("allows the fields that may change", func() {
		Expect(update(claim, set(int64(60), "spec", "waitTimeoutSeconds"))).To(Succeed())
		Expect(update(lock, set(int64(120), "spec", "leaseDurationSeconds"))).To(Succeed())
		Expect(update(lock, set(int64(5), "spec", "maxHolders"))).To(Succeed())
		Expect(update(lock, set(int64(0), "spec", "holderNodeLossSeconds"))).To(Succeed())
		Expect(update(lock, set(int64(3600), "spec", "holderNodeLossSeconds"))).To(Succeed())
		Expect(update(backend, set("redis-2:6379", "spec", "redis", "address"))).To(Succeed())
	})
})
