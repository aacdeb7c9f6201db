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

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BuiltinBackendName names the backend that keeps lock state in the Kubernetes API itself. It
// exists without a LockBackend object and is used when a DistributedLock names no backend.
const BuiltinBackendName = "kubernetes"

// BackendType says which kind of store a LockBackend points at.
// +kubebuilder:validation:Enum=Kubernetes;Redis;Redlock;Etcd;ZooKeeper;SQL
type BackendType string

// The backend types. Each but Kubernetes has a configuration member of the same name in
// LockBackendSpec.
const (
	BackendKubernetes BackendType = "Kubernetes"
	BackendRedis      BackendType = "Redis"
	BackendRedlock    BackendType = "Redlock"
	BackendEtcd       BackendType = "Etcd"
	BackendZooKeeper  BackendType = "ZooKeeper"
	BackendSQL        BackendType = "SQL"
)

// KeyPolicy says how a lock's key is placed on its backend.
// +kubebuilder:validation:Enum=Namespaced;Verbatim
type KeyPolicy string

const (
	// KeyPolicyNamespaced places every lock's key under lockwarden/<namespace>/, so that no
	// namespace can reach another's keys.
	KeyPolicyNamespaced KeyPolicy = "Namespaced"
	// KeyPolicyVerbatim uses spec.key as written, for a store shared with clients outside
	// Kubernetes. Any namespace the backend admits can then name any key on it.
	KeyPolicyVerbatim KeyPolicy = "Verbatim"
)

// HostPort is a network address in the form host:port, where host is a DNS name, an IPv4
// address or a bracketed IPv6 address, and port is 1..65535.
// +kubebuilder:validation:MaxLength=261
// +kubebuilder:validation:XValidation:rule=`self.matches(r'^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?):[0-9]{1,5}$') && int(self.substring(self.lastIndexOf(':') + 1)) >= 1 && int(self.substring(self.lastIndexOf(':') + 1)) <= 65535`,message="must be host:port with a port from 1 to 65535, e.g. redis.infra.svc:6379, 10.0.0.7:6379 or [fd00::7]:6379"
type HostPort string

// EtcdEndpoint is an etcd client URL (http:// or https://) or a bare host:port.
// +kubebuilder:validation:MaxLength=269
// +kubebuilder:validation:XValidation:rule=`self.matches(r'^(https?://)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?):[0-9]{1,5}$') && int(self.substring(self.lastIndexOf(':') + 1)) >= 1 && int(self.substring(self.lastIndexOf(':') + 1)) <= 65535`,message="must be an etcd client URL such as https://etcd-0.etcd:2379 or a host:port with a port from 1 to 65535"
type EtcdEndpoint string

// SecretReference names a Secret. The controller reads Secrets only in its own namespace (a flag
// of the manager and a Helm value), so namespace must be that one.
type SecretReference struct {
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// namespace of the Secret: the controller's Secret namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
}

// SecretKeySelector names one key of a Secret.
type SecretKeySelector struct {
	SecretReference `json:",inline"`

	// key in the Secret's data whose value is used.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key"`
}

// TLSConfig turns on TLS to the backend. An empty object means TLS verified against the system's
// root certificates.
type TLSConfig struct {
	// caSecretRef names a Secret key that holds the PEM bundle of certificate authorities trusted
	// for the backend's certificate; absent means the system's roots.
	// +optional
	CASecretRef *SecretKeySelector `json:"caSecretRef,omitempty"`

	// clientCertSecretRef names a Secret of type kubernetes.io/tls whose tls.crt and tls.key the
	// controller presents for mutual TLS.
	// +optional
	ClientCertSecretRef *SecretReference `json:"clientCertSecretRef,omitempty"`

	// serverName overrides the name checked against the backend's certificate.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ServerName string `json:"serverName,omitempty"`

	// insecureSkipVerify disables verification of the backend's certificate. For tests only: a
	// man in the middle could then grant and revoke locks.
	// +optional
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
}

// RedisBackend configures a single Redis server (or a primary behind a stable address).
type RedisBackend struct {
	// address of the Redis server as host:port.
	// +required
	Address HostPort `json:"address"`

	// db is the Redis logical database number.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1023
	DB int32 `json:"db,omitempty"`

	// passwordSecretRef names the Secret key holding the Redis password (AUTH).
	// +optional
	PasswordSecretRef *SecretKeySelector `json:"passwordSecretRef,omitempty"`

	// tls turns on TLS to Redis.
	// +optional
	TLS *TLSConfig `json:"tls,omitempty"`
}

// RedlockBackend configures the Redlock algorithm over independent Redis masters.
type RedlockBackend struct {
	// addresses of the independent Redis masters as host:port, an odd number of at least 3. A lock
	// is held while a majority of them hold it.
	// +required
	// +listType=set
	// +kubebuilder:validation:MaxItems=15
	// +kubebuilder:validation:XValidation:rule="size(self) >= 3",message="redlock needs at least 3 independent Redis nodes; use type Redis for a single server"
	// +kubebuilder:validation:XValidation:rule="size(self) % 2 == 1",message="redlock needs an odd number of Redis nodes so that a majority is unambiguous"
	Addresses []HostPort `json:"addresses"`

	// passwordSecretRef names the Secret key holding the password used on every node.
	// +optional
	PasswordSecretRef *SecretKeySelector `json:"passwordSecretRef,omitempty"`

	// tls turns on TLS to every node.
	// +optional
	TLS *TLSConfig `json:"tls,omitempty"`
}

// EtcdBackend configures an etcd cluster.
type EtcdBackend struct {
	// endpoints of the etcd cluster's members.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=15
	Endpoints []EtcdEndpoint `json:"endpoints"`

	// usernameSecretRef names the Secret key holding the etcd user name.
	// +optional
	UsernameSecretRef *SecretKeySelector `json:"usernameSecretRef,omitempty"`

	// passwordSecretRef names the Secret key holding the etcd password.
	// +optional
	PasswordSecretRef *SecretKeySelector `json:"passwordSecretRef,omitempty"`

	// tls turns on TLS to etcd.
	// +optional
	TLS *TLSConfig `json:"tls,omitempty"`
}

// ZooKeeperBackend configures a ZooKeeper ensemble.
type ZooKeeperBackend struct {
	// servers of the ensemble as host:port.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=15
	Servers []HostPort `json:"servers"`

	// sessionTimeoutSeconds is the session timeout the controller asks for; the server may clamp
	// it to its own bounds (by default 2 to 20 ticks). Locks of a session that expires are lost.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=600
	SessionTimeoutSeconds int32 `json:"sessionTimeoutSeconds,omitempty"`

	// digestAuthSecretRef names the Secret key holding "user:password" for digest authentication.
	// +optional
	DigestAuthSecretRef *SecretKeySelector `json:"digestAuthSecretRef,omitempty"`
}

// SQLDriver names a SQL dialect.
// +kubebuilder:validation:Enum=postgres;mysql
type SQLDriver string

// The SQL drivers. mysql serves MariaDB too.
const (
	SQLDriverPostgres SQLDriver = "postgres"
	SQLDriverMySQL    SQLDriver = "mysql"
)

// SQLBackend configures a lock table in a PostgreSQL or MySQL/MariaDB database.
type SQLBackend struct {
	// driver is the database dialect.
	// +required
	Driver SQLDriver `json:"driver"`

	// dsnSecretRef names the Secret key holding the data source name (connection string). It is
	// never logged or shown in status.
	// +required
	DSNSecretRef SecretKeySelector `json:"dsnSecretRef"`

	// table is the name of the lock table, created on first use with its sessions table,
	// <table>_sessions, and the table of shared locks' places, <table>_places. At most 54
	// characters, so that the sessions table's name fits the databases' 63-character identifiers.
	// +optional
	// +kubebuilder:default=lockwarden_locks
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^[A-Za-z_][A-Za-z0-9_]*$')`,message="table must be a plain SQL identifier: letters, digits and underscores, not starting with a digit"
	// +kubebuilder:validation:XValidation:rule="self.size() <= 54",message="table may have at most 54 characters: lockwarden also creates <table>_sessions, and SQL identifiers have at most 63"
	Table string `json:"table,omitempty"`
}

// LockBackendSpec says where locks live.
// +kubebuilder:validation:XValidation:rule="self.type == 'Redis' ? has(self.redis) : !has(self.redis)",message="spec.redis must be set when type is Redis and only then"
// +kubebuilder:validation:XValidation:rule="self.type == 'Redlock' ? has(self.redlock) : !has(self.redlock)",message="spec.redlock must be set when type is Redlock and only then"
// +kubebuilder:validation:XValidation:rule="self.type == 'Etcd' ? has(self.etcd) : !has(self.etcd)",message="spec.etcd must be set when type is Etcd and only then"
// +kubebuilder:validation:XValidation:rule="self.type == 'ZooKeeper' ? has(self.zookeeper) : !has(self.zookeeper)",message="spec.zookeeper must be set when type is ZooKeeper and only then"
// +kubebuilder:validation:XValidation:rule="self.type == 'SQL' ? has(self.sql) : !has(self.sql)",message="spec.sql must be set when type is SQL and only then"
// +kubebuilder:validation:XValidation:rule="self.type != 'Kubernetes' || !has(self.keyPolicy) || self.keyPolicy == 'Namespaced'",message="keyPolicy must be Namespaced for type Kubernetes: lock records of the Kubernetes API always stay in their namespace"
type LockBackendSpec struct {
	// type of the store. Immutable: create another LockBackend to move locks elsewhere.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="type is immutable; create a new LockBackend instead"
	Type BackendType `json:"type"`

	// redis configures a single Redis server; set exactly when type is Redis.
	// +optional
	Redis *RedisBackend `json:"redis,omitempty"`

	// redlock configures Redlock over independent Redis masters; set exactly when type is Redlock.
	// +optional
	Redlock *RedlockBackend `json:"redlock,omitempty"`

	// etcd configures an etcd cluster; set exactly when type is Etcd.
	// +optional
	Etcd *EtcdBackend `json:"etcd,omitempty"`

	// zookeeper configures a ZooKeeper ensemble; set exactly when type is ZooKeeper.
	// +optional
	ZooKeeper *ZooKeeperBackend `json:"zookeeper,omitempty"`

	// sql configures a lock table in a SQL database; set exactly when type is SQL.
	// +optional
	SQL *SQLBackend `json:"sql,omitempty"`

	// keyPolicy says where locks' keys live on the store. Namespaced (the default) puts every key
	// under lockwarden/<namespace>/, so that no namespace can reach another's keys. Verbatim uses
	// spec.key as written, for a store shared with clients outside Kubernetes (Redisson,
	// etcdctl, a job on a VM); then any namespace this backend admits can take any key on it, so
	// pair Verbatim with a namespaceSelector that admits only trusted namespaces. A lock without
	// spec.key has the key lockwarden/<namespace>/<name> under either policy. Immutable: changing
	// it would move the keys of held locks. Type Kubernetes is always Namespaced.
	// +optional
	// +kubebuilder:default=Namespaced
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="keyPolicy is immutable: it would move the keys of held locks; create a new LockBackend instead"
	KeyPolicy KeyPolicy `json:"keyPolicy,omitempty"`

	// namespaceSelector limits which namespaces' DistributedLocks may use this backend. Absent
	// means every namespace.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
}

// LockBackendStatus is the observed state of a LockBackend.
type LockBackendStatus struct {
	// conditions: Ready reports the last live probe of the backend (reachable, authenticated,
	// writable).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation of the spec that the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// LockBackend is where locks live: the Kubernetes API, Redis, Redlock, etcd, ZooKeeper or a SQL
// database. Cluster-scoped and meant for cluster admins, so that namespace users can never make
// the controller connect to an address of their choosing.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=lb,categories=locks
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Message",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name != 'kubernetes' || self.spec.type == 'Kubernetes'",message="the name kubernetes is reserved for the built-in backend and may only have type Kubernetes"
type LockBackend struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says where locks live.
	// +required
	Spec LockBackendSpec `json:"spec"`

	// status is the observed state.
	// +optional
	Status LockBackendStatus `json:"status,omitempty"`
}

// LockBackendList is a list of LockBackends.
// +kubebuilder:object:root=true
type LockBackendList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LockBackend `json:"items"`
}

func init() {
	SchemeBuilder.Register(&LockBackend{}, &LockBackendList{})
}
