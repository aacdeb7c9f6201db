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

// Package charts_test checks the Helm chart without a cluster: helm lint, the values schema
// rejecting bad values, what the defaults render to, and that the chart stays equivalent to the
// kustomize configuration in config/default. It runs the real helm and kubectl built into the
// cache by hack/k8s-binaries.sh.
package charts_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

const chart = "lockwarden"

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// tool returns the path of a binary from the cache (helm or kubectl), building it if needed.
func tool(t *testing.T, name string) string {
	t.Helper()
	binOnce.Do(func() {
		out, err := exec.Command(filepath.Join("..", "hack", "k8s-binaries.sh"), "bin-dir").Output()
		binDir, binErr = strings.TrimSpace(string(out)), err
	})
	if binErr != nil {
		t.Fatalf("hack/k8s-binaries.sh bin-dir: %v", binErr)
	}
	return filepath.Join(binDir, name)
}

// run runs a cached tool and returns its combined output and error.
func run(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	out, err := command(t, name, args...).CombinedOutput()
	return string(out), err
}

// command prepares a cached tool to run with its caches and config in a temporary directory.
func command(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(tool(t, name), args...)
	// helm keeps caches and config under these; keep them out of the user's home.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	return cmd
}

// render runs helm template with the given extra arguments and returns the objects by kind/name.
func render(t *testing.T, args ...string) objects {
	t.Helper()
	out, err := run(t, "helm", append([]string{"template", "lw", chart, "--namespace", "locks"}, args...)...)
	if err != nil {
		t.Fatalf("helm template %v: %v\n%s", args, err, out)
	}
	return parse(t, out)
}

// objects are rendered manifests, keyed "Kind/name".
type objects map[string][]byte

func parse(t *testing.T, manifests string) objects {
	t.Helper()
	objs := objects{}
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(manifests, -1) {
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("rendered YAML does not parse: %v\n%s", err, doc)
		}
		if meta.Kind == "" {
			continue
		}
		objs[meta.Kind+"/"+meta.Metadata.Name] = []byte(doc)
	}
	return objs
}

func (o objects) get(t *testing.T, key string, into any) {
	t.Helper()
	doc, ok := o[key]
	if !ok {
		t.Fatalf("no %s among %v", key, o.keys())
	}
	if err := yaml.UnmarshalStrict(doc, into); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
}

func (o objects) keys() []string {
	var k []string
	for key := range o {
		k = append(k, key)
	}
	slices.Sort(k)
	return k
}

func (o objects) ofKind(kind string) []string {
	var k []string
	for _, key := range o.keys() {
		if strings.HasPrefix(key, kind+"/") {
			k = append(k, key)
		}
	}
	return k
}

func TestLint(t *testing.T) {
	for name, args := range map[string][]string{
		"defaults":     nil,
		"every option": {"--values", filepath.Join("testdata", "all-options.yaml")},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := run(t, "helm", append([]string{"lint", "--strict", chart}, args...)...)
			if err != nil {
				t.Fatalf("helm lint: %v\n%s", err, out)
			}
		})
	}
}

func TestSchemaRejectsBadValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  []string
		want string
	}{
		{"unknown top-level key", []string{"replicas=2"}, "additional properties 'replicas' not allowed"},
		{"unknown nested key", []string{"crds.install=true"}, "additional properties 'install' not allowed"},
		{"replicas not a number", []string{"replicaCount=two"}, "at '/replicaCount': got string, want integer"},
		{"negative replicas", []string{"replicaCount=-1"}, "at '/replicaCount': minimum: got -1, want 0"},
		{"two replicas without leader election", []string{"leaderElection.enabled=false"}, "at '/leaderElection/enabled': value must be true"},
		{"crds.keep not a bool", []string{"crds.keep=maybe"}, "at '/crds/keep': got string, want boolean"},
		{"bad pull policy", []string{"image.pullPolicy=Sometimes"}, "at '/image/pullPolicy': value must be one of 'Always', 'IfNotPresent', 'Never'"},
		{"bad digest", []string{"image.digest=latest"}, "at '/image/digest'"},
		{"bad log level", []string{"controller.logLevel=verbose"}, "at '/controller/logLevel': value must be one of 'debug', 'info', 'error'"},
		{"zero workers", []string{"controller.claimWorkers=0"}, "at '/controller/claimWorkers': minimum: got 0, want 1"},
		{"negative namespace workers", []string{"controller.namespaceWorkers=-1"}, "at '/controller/namespaceWorkers': minimum: got -1, want 0"},
		{"negative namespace rate", []string{"controller.namespaceRate=-1"}, "at '/controller/namespaceRate': minimum: got -1, want 0"},
		{"namespace rate not a number", []string{"controller.namespaceRate=fast"}, "at '/controller/namespaceRate': got string, want number"},
		{"port out of range", []string{"metrics.port=70000"}, "at '/metrics/port': maximum: got 70,000, want 65,535"},
		{"bad anti-affinity", []string{"podAntiAffinity=always"}, "at '/podAntiAffinity': value must be one of 'soft', 'hard', 'none'"},
		{"bad scrape interval", []string{"metrics.serviceMonitor.interval=often"}, "at '/metrics/serviceMonitor/interval'"},
		{"leader election lease without a unit", []string{"leaderElection.leaseDuration=15"}, "at '/leaderElection/leaseDuration'"},
		{"bad secret namespace", []string{"secretNamespace=Not_A_Namespace"}, "at '/secretNamespace'"},
		{"extra arg that is not a flag", []string{"controller.extraArgs[0]=verbose"}, "at '/controller/extraArgs/0'"},
		{"lock backend without a type", []string{"lockBackends[0].name=redis", "lockBackends[0].spec.redis.address=r:6379"}, "missing property 'type'"},
		{"lock backend of an unknown type", []string{"lockBackends[0].name=mem", "lockBackends[0].spec.type=Memcached"}, "at '/lockBackends/0/spec/type': value must be one of"},
		{"memory request that is not a quantity", []string{"resources.requests.memory=lots"}, "at '/resources/requests/memory'"},
		{"metrics.secure not a bool", []string{"metrics.secure=sometimes"}, "at '/metrics/secure': got string, want boolean"},
		{"bad metrics certificate Secret name", []string{"metrics.tls.secretName=Not_A_Secret"}, "at '/metrics/tls/secretName'"},
		{"ServiceMonitor authorization without credentials key", []string{"metrics.serviceMonitor.authorization.credentials.name=token"}, "missing property 'key'"},
		{"unknown alert", []string{"metrics.prometheusRule.lockStolen.enabled=true"}, "additional properties 'lockStolen' not allowed"},
		{"alert duration without a unit", []string{"metrics.prometheusRule.backendNotReady.for=5"}, "at '/metrics/prometheusRule/backendNotReady/for'"},
		{"zero wait threshold", []string{"metrics.prometheusRule.claimsWaiting.thresholdSeconds=0"}, "at '/metrics/prometheusRule/claimsWaiting/thresholdSeconds': minimum"},
		{"wait threshold under a second, as --set gives it", []string{"metrics.prometheusRule.claimsWaiting.thresholdSeconds=0.5"}, "at '/metrics/prometheusRule/claimsWaiting/thresholdSeconds'"},
		{"negative lost holds threshold", []string{"metrics.prometheusRule.lostHolds.threshold=-1"}, "at '/metrics/prometheusRule/lostHolds/threshold': minimum"},
		{"empty severity", []string{"metrics.prometheusRule.renewalFailures.severity="}, "at '/metrics/prometheusRule/renewalFailures/severity'"},
		{"dashboard label that is not a label", []string{"metrics.grafanaDashboard.sidecarLabel=grafana dashboard"}, "at '/metrics/grafanaDashboard/sidecarLabel'"},
		{"workload kind without a version", []string{"workloads.extraKinds[0].apiVersion=example.com", "workloads.extraKinds[0].kind=Backup",
			"workloads.extraKinds[0].resource=backups"}, "at '/workloads/extraKinds/0/apiVersion'"},
		{"workload resource that is a kind", []string{"workloads.extraKinds[0].apiVersion=example.com/v1", "workloads.extraKinds[0].kind=Backup",
			"workloads.extraKinds[0].resource=Backup"}, "at '/workloads/extraKinds/0/resource'"},
		{"workload kind without its resource", []string{"workloads.extraKinds[0].apiVersion=example.com/v1", "workloads.extraKinds[0].kind=Backup"},
			"missing property 'resource'"},
		{"dashboard label value that is a number", []string{"metrics.grafanaDashboard.sidecarLabelValue=1"}, "at '/metrics/grafanaDashboard/sidecarLabelValue': got number, want string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"template", "lw", chart}
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			out, err := run(t, "helm", args...)
			if err == nil {
				t.Fatalf("helm template --set %v was accepted", tc.set)
			}
			if !strings.Contains(out, "values don't meet the specifications of the schema") || !strings.Contains(out, tc.want) {
				t.Fatalf("helm template --set %v: want a schema error containing %q, got:\n%s", tc.set, tc.want, out)
			}
		})
	}

	t.Run("template checks the schema cannot express", func(t *testing.T) {
		for _, tc := range []struct {
			set  []string
			want string
		}{
			{[]string{"podDisruptionBudget.minAvailable=2"}, "podDisruptionBudget.minAvailable must be below replicaCount"},
			{[]string{"serviceAccount.create=false"}, "serviceAccount.name must name an existing ServiceAccount"},
			{[]string{"metrics.secure=false", "metrics.tls.secretName=metrics-tls"}, "metrics.tls.secretName needs metrics.secure"},
		} {
			args := []string{"template", "lw", chart}
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			out, err := run(t, "helm", args...)
			if err == nil || !strings.Contains(out, tc.want) {
				t.Errorf("helm template --set %v: want an error containing %q, got %v:\n%s", tc.set, tc.want, err, out)
			}
		}
	})
}

func TestDefaults(t *testing.T) {
	g := NewWithT(t)
	objs := render(t)
	g.Expect(objs.keys()).To(ConsistOf(
		"CustomResourceDefinition/lockbackends.locks.lockwarden.io",
		"CustomResourceDefinition/distributedlocks.locks.lockwarden.io",
		"CustomResourceDefinition/lockclaims.locks.lockwarden.io",
		"ServiceAccount/lw-lockwarden",
		"ClusterRole/lw-lockwarden-manager",
		"ClusterRoleBinding/lw-lockwarden-manager",
		"Role/lw-lockwarden-leader-election",
		"RoleBinding/lw-lockwarden-leader-election",
		"Role/lw-lockwarden-namespace",
		"RoleBinding/lw-lockwarden-namespace",
		"ClusterRole/lw-lockwarden-lock-editor",
		"ClusterRole/lw-lockwarden-lock-viewer",
		"ClusterRole/lw-lockwarden-metrics-auth",
		"ClusterRoleBinding/lw-lockwarden-metrics-auth",
		"ClusterRole/lw-lockwarden-metrics-reader",
		"Deployment/lw-lockwarden",
		"Service/lw-lockwarden-metrics",
		"PodDisruptionBudget/lw-lockwarden",
		holderPolicyKey, holderBindingKey, // every supported Kubernetes serves ValidatingAdmissionPolicy
		podEditsPolicyKey, podEditsBindingKey,
	), "helm template assumes no MutatingAdmissionPolicy API (charts/admission_test.go)")

	var d appsv1.Deployment
	objs.get(t, "Deployment/lw-lockwarden", &d)
	g.Expect(d.Spec.Replicas).To(Equal(ptr.To[int32](2)), "HA by default")
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	g.Expect(c.Args).To(ContainElements("--leader-elect", "--leader-election-namespace=locks",
		"--secret-namespace=locks", "--metrics-bind-address=:8443", "--metrics-secure=true", "--health-probe-bind-address=:8081",
		"--namespace-workers=0", "--namespace-rate=0"), "no bound on a namespace's passes by default (docs/scale.md)")
	g.Expect(c.Args).NotTo(ContainElement(HavePrefix("--metrics-cert-path")), "a self-signed certificate by default")
	g.Expect(c.Image).To(Equal("ghcr.io/lockwarden/lockwarden:"+releaseVersion(t)),
		"the image tag defaults to appVersion, which is the release in VERSION")

	// A security context that passes the Pod Security "restricted" profile.
	g.Expect(pod.SecurityContext.RunAsNonRoot).To(Equal(ptr.To(true)))
	g.Expect(pod.SecurityContext.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault))
	g.Expect(c.SecurityContext.AllowPrivilegeEscalation).To(Equal(ptr.To(false)))
	g.Expect(c.SecurityContext.ReadOnlyRootFilesystem).To(Equal(ptr.To(true)))
	g.Expect(c.SecurityContext.Capabilities.Drop).To(Equal([]corev1.Capability{"ALL"}))
	g.Expect(c.SecurityContext.Privileged).To(BeNil())
	g.Expect(pod.HostNetwork || pod.HostPID || pod.HostIPC).To(BeFalse())
	g.Expect(pod.Volumes).To(BeEmpty())
	g.Expect(c.LivenessProbe.HTTPGet.Path).To(Equal("/healthz"))
	g.Expect(c.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))
	g.Expect(c.Resources.Requests).NotTo(BeEmpty())
	g.Expect(c.Resources.Limits).NotTo(BeEmpty())

	for _, crd := range objs.ofKind("CustomResourceDefinition") {
		g.Expect(string(objs[crd])).To(ContainSubstring("helm.sh/resource-policy: keep"), "%s is kept on uninstall by default", crd)
	}

	t.Run("crds.keep=false drops the resource policy", func(t *testing.T) {
		objs := render(t, "--set", "crds.keep=false")
		crds := objs.ofKind("CustomResourceDefinition")
		NewWithT(t).Expect(crds).To(HaveLen(3))
		for _, crd := range crds {
			NewWithT(t).Expect(string(objs[crd])).NotTo(ContainSubstring("helm.sh/resource-policy"))
		}
	})
	t.Run("crds.enabled=false leaves the CRDs out", func(t *testing.T) {
		NewWithT(t).Expect(render(t, "--set", "crds.enabled=false").ofKind("CustomResourceDefinition")).To(BeEmpty())
	})
	t.Run("secretNamespace moves the namespace Role and the manager's flag", func(t *testing.T) {
		g := NewWithT(t)
		objs := render(t, "--set", "secretNamespace=vault")
		var r rbacv1.Role
		objs.get(t, "Role/lw-lockwarden-namespace", &r)
		g.Expect(r.Namespace).To(Equal("vault"))
		var d appsv1.Deployment
		objs.get(t, "Deployment/lw-lockwarden", &d)
		g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--secret-namespace=vault"))
	})
	t.Run("tenantQuotas bound each tenant's claims and locks with a ResourceQuota", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(render(t).ofKind("ResourceQuota")).To(BeEmpty(), "none by default")
		var q corev1.ResourceQuota
		render(t, "--set", "tenantQuotas[0].namespace=team-a", "--set", "tenantQuotas[0].lockClaims=500",
			"--set", "tenantQuotas[0].distributedLocks=50").get(t, "ResourceQuota/lw-lockwarden-locks", &q)
		g.Expect(q.Namespace).To(Equal("team-a"))
		g.Expect(q.Spec.Hard).To(HaveLen(2))
		g.Expect(q.Spec.Hard).To(HaveKeyWithValue(corev1.ResourceName("count/lockclaims.locks.lockwarden.io"), resource.MustParse("500")))
		g.Expect(q.Spec.Hard).To(HaveKeyWithValue(corev1.ResourceName("count/distributedlocks.locks.lockwarden.io"), resource.MustParse("50")))
		q = corev1.ResourceQuota{}
		render(t, "--set", "tenantQuotas[0].namespace=team-b", "--set", "tenantQuotas[0].lockClaims=0").
			get(t, "ResourceQuota/lw-lockwarden-locks", &q)
		g.Expect(q.Namespace).To(Equal("team-b"))
		g.Expect(q.Spec.Hard).To(HaveLen(1), "a count of 0 is a quota too: no claims at all")
		g.Expect(q.Spec.Hard).To(HaveKeyWithValue(corev1.ResourceName("count/lockclaims.locks.lockwarden.io"), resource.MustParse("0")))

		out, err := run(t, "helm", "template", "lw", chart, "--namespace", "locks", "--set", "tenantQuotas[0].namespace=team-a")
		g.Expect(err).To(HaveOccurred())
		g.Expect(out).To(ContainSubstring(`tenantQuotas entry for namespace "team-a" sets neither lockClaims nor distributedLocks`))
	})
	t.Run("a single replica has no PodDisruptionBudget", func(t *testing.T) {
		NewWithT(t).Expect(render(t, "--set", "replicaCount=1").ofKind("PodDisruptionBudget")).To(BeEmpty())
	})
	t.Run("metrics are served over HTTPS to tokens allowed to get /metrics", func(t *testing.T) {
		g := NewWithT(t)
		var svc corev1.Service
		objs.get(t, "Service/lw-lockwarden-metrics", &svc)
		g.Expect(svc.Spec.Ports).To(ConsistOf(HaveField("Name", "https")))
		var binding rbacv1.ClusterRoleBinding
		objs.get(t, "ClusterRoleBinding/lw-lockwarden-metrics-auth", &binding)
		g.Expect(binding.RoleRef.Name).To(Equal("lw-lockwarden-metrics-auth"))
		g.Expect(binding.Subjects).To(ConsistOf(rbacv1.Subject{Kind: "ServiceAccount", Name: "lw-lockwarden", Namespace: "locks"}))
		var reader rbacv1.ClusterRole
		objs.get(t, "ClusterRole/lw-lockwarden-metrics-reader", &reader)
		g.Expect(reader.Rules).To(ConsistOf(rbacv1.PolicyRule{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}))

		ep := serviceMonitorEndpoint(t, render(t, "--set", "metrics.serviceMonitor.enabled=true"))
		g.Expect(ep.Port).To(Equal("https"))
		g.Expect(ep.Scheme).To(Equal("https"))
		g.Expect(ep.BearerTokenFile).To(Equal("/var/run/secrets/kubernetes.io/serviceaccount/token"), "Prometheus's own token")
		g.Expect(ep.Authorization).To(BeEmpty())
		g.Expect(ep.TLSConfig).To(Equal(map[string]any{
			"ca":         map[string]any{"secret": map[string]any{"name": "lw-lockwarden-metrics-tls", "key": "ca.crt"}},
			"serverName": "lw-lockwarden-metrics.locks.svc",
		}), "Prometheus checks whom it sends its token to, against the certificate the chart provides")
	})
	t.Run("a ServiceMonitor gets a certificate it can verify: generated by the chart, or by cert-manager", func(t *testing.T) {
		g := NewWithT(t)
		objs := render(t, "--set", "metrics.serviceMonitor.enabled=true")
		var secret corev1.Secret
		objs.get(t, "Secret/lw-lockwarden-metrics-tls", &secret)
		roots := x509.NewCertPool()
		g.Expect(roots.AppendCertsFromPEM(secret.Data["ca.crt"])).To(BeTrue(), "ca.crt")
		block, _ := pem.Decode(secret.Data["tls.crt"])
		g.Expect(block).NotTo(BeNil(), "tls.crt")
		cert, err := x509.ParseCertificate(block.Bytes)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "lw-lockwarden-metrics.locks.svc"})
		g.Expect(err).NotTo(HaveOccurred(), "the serving certificate verifies against ca.crt for the Service's name")
		_, err = tls.X509KeyPair(secret.Data["tls.crt"], secret.Data["tls.key"])
		g.Expect(err).NotTo(HaveOccurred(), "tls.key goes with tls.crt")
		var d appsv1.Deployment
		objs.get(t, "Deployment/lw-lockwarden", &d)
		g.Expect(d.Spec.Template.Spec.Volumes).To(ConsistOf(HaveField("Secret.SecretName", "lw-lockwarden-metrics-tls")))
		g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--metrics-cert-path=/etc/lockwarden/metrics-tls"))

		withCertManager := render(t, "--set", "metrics.serviceMonitor.enabled=true", "--api-versions", "cert-manager.io/v1")
		g.Expect(withCertManager.keys()).To(ContainElements("Issuer/lw-lockwarden-metrics-tls-selfsigned", "Certificate/lw-lockwarden-metrics-tls-ca",
			"Issuer/lw-lockwarden-metrics-tls-ca", "Certificate/lw-lockwarden-metrics-tls"))
		g.Expect(withCertManager.keys()).NotTo(ContainElement("Secret/lw-lockwarden-metrics-tls"), "cert-manager writes it")
		g.Expect(serviceMonitorEndpoint(t, withCertManager).TLSConfig).To(HaveKeyWithValue("serverName", "lw-lockwarden-metrics.locks.svc"))

		none := render(t, "--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.tls.provider=none")
		g.Expect(none.keys()).NotTo(ContainElement(ContainSubstring("metrics-tls")))
		g.Expect(serviceMonitorEndpoint(t, none).TLSConfig).To(Equal(map[string]any{"insecureSkipVerify": true}), "provider none: each pod's self-signed certificate")

		g.Expect(render(t).keys()).NotTo(ContainElement(ContainSubstring("metrics-tls")), "no ServiceMonitor, no certificate: each pod's own")
	})
	t.Run("metrics.tls.secretName mounts the certificate and lets the ServiceMonitor verify it", func(t *testing.T) {
		g := NewWithT(t)
		objs := render(t, "--set", "metrics.tls.secretName=metrics-tls", "--set", "metrics.serviceMonitor.enabled=true")
		var d appsv1.Deployment
		objs.get(t, "Deployment/lw-lockwarden", &d)
		pod := d.Spec.Template.Spec
		g.Expect(pod.Volumes).To(ConsistOf(And(HaveField("Name", "metrics-tls"), HaveField("Secret.SecretName", "metrics-tls"))))
		g.Expect(pod.Containers[0].VolumeMounts).To(ConsistOf(And(HaveField("Name", "metrics-tls"),
			HaveField("MountPath", "/etc/lockwarden/metrics-tls"), HaveField("ReadOnly", true))))
		g.Expect(pod.Containers[0].Args).To(ContainElement("--metrics-cert-path=/etc/lockwarden/metrics-tls"))
		ep := serviceMonitorEndpoint(t, objs)
		g.Expect(ep.TLSConfig).To(Equal(map[string]any{
			"ca":         map[string]any{"secret": map[string]any{"name": "metrics-tls", "key": "ca.crt"}},
			"serverName": "lw-lockwarden-metrics.locks.svc",
		}))

		ep = serviceMonitorEndpoint(t, render(t, "--set", "metrics.serviceMonitor.enabled=true",
			"--set", "metrics.serviceMonitor.tlsConfig.serverName=metrics.example.com",
			"--set", "metrics.serviceMonitor.authorization.credentials.name=prometheus-token",
			"--set", "metrics.serviceMonitor.authorization.credentials.key=token"))
		g.Expect(ep.TLSConfig).To(Equal(map[string]any{"serverName": "metrics.example.com"}), "a tlsConfig of one's own replaces the chart's")
		g.Expect(ep.Authorization).To(Equal(map[string]any{"credentials": map[string]any{"name": "prometheus-token", "key": "token"}}))
		g.Expect(ep.BearerTokenFile).To(BeEmpty())
	})
	t.Run("metrics.secure=false serves plain HTTP and grants no token checks", func(t *testing.T) {
		g := NewWithT(t)
		objs := render(t, "--set", "metrics.secure=false", "--set", "metrics.serviceMonitor.enabled=true")
		g.Expect(objs.keys()).NotTo(ContainElement(ContainSubstring("metrics-auth")))
		g.Expect(objs.keys()).NotTo(ContainElement(ContainSubstring("metrics-reader")))
		var d appsv1.Deployment
		objs.get(t, "Deployment/lw-lockwarden", &d)
		g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--metrics-secure=false"))
		var svc corev1.Service
		objs.get(t, "Service/lw-lockwarden-metrics", &svc)
		g.Expect(svc.Spec.Ports).To(ConsistOf(HaveField("Name", "http")))
		ep := serviceMonitorEndpoint(t, objs)
		g.Expect(ep.Port).To(Equal("http"))
		g.Expect(ep.Scheme).To(Equal("http"))
		g.Expect(ep.BearerTokenFile).To(BeEmpty())
		g.Expect(ep.TLSConfig).To(BeEmpty())
	})
	t.Run("every option renders", func(t *testing.T) {
		g := NewWithT(t)
		objs := render(t, "--values", filepath.Join("testdata", "all-options.yaml"), "--api-versions", mapAPI)
		g.Expect(objs.keys()).To(ContainElements("ServiceMonitor/lw-lockwarden", "LockBackend/redis-main", "LockBackend/etcd",
			"PrometheusRule/lw-lockwarden", "ConfigMap/lw-lockwarden-dashboard", bindingKey))
		var d appsv1.Deployment
		objs.get(t, "Deployment/lw-lockwarden", &d)
		g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(HavePrefix("registry.example.com/lockwarden@sha256:"))
		g.Expect(d.Spec.Template.Spec.TopologySpreadConstraints[0].LabelSelector.MatchLabels).
			To(HaveKeyWithValue("app.kubernetes.io/instance", "lw"), "a constraint without a selector gets the pods' labels")
	})
}

// endpoint is the part of a ServiceMonitor's endpoint the tests look at (the chart does not depend
// on prometheus-operator's Go types).
type endpoint struct {
	Port            string         `json:"port"`
	Scheme          string         `json:"scheme"`
	BearerTokenFile string         `json:"bearerTokenFile"`
	Authorization   map[string]any `json:"authorization"`
	TLSConfig       map[string]any `json:"tlsConfig"`
}

// serviceMonitorEndpoint returns the only endpoint of the chart's ServiceMonitor.
func serviceMonitorEndpoint(t *testing.T, objs objects) endpoint {
	t.Helper()
	doc, ok := objs["ServiceMonitor/lw-lockwarden"]
	if !ok {
		t.Fatalf("no ServiceMonitor among %v", objs.keys())
	}
	var sm struct {
		Spec struct {
			Endpoints []endpoint `json:"endpoints"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(doc, &sm); err != nil {
		t.Fatal(err)
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("want one endpoint, got %d:\n%s", len(sm.Spec.Endpoints), doc)
	}
	return sm.Spec.Endpoints[0]
}

// TestEquivalentToKustomize compares the chart's defaults with config/default (make deploy): the
// same RBAC rules for every role, the same pod: security contexts, probes, resources, replicas,
// affinity and disruption budget, and the same admission policy.
func TestEquivalentToKustomize(t *testing.T) {
	g := NewWithT(t)
	chartObjs := render(t, "--api-versions", mapAPI) // a cluster that serves MutatingAdmissionPolicy
	out, err := run(t, "kubectl", "kustomize", filepath.Join("..", "config", "default"))
	if err != nil {
		t.Fatalf("kubectl kustomize config/default: %v\n%s", err, out)
	}
	kustObjs := parse(t, out)

	rulesOf := func(objs objects, prefix string) map[string][]rbacv1.PolicyRule {
		m := map[string][]rbacv1.PolicyRule{}
		for _, kind := range []string{"ClusterRole", "Role"} {
			for _, key := range objs.ofKind(kind) {
				var r rbacv1.ClusterRole // a Role has the same fields
				objs.get(t, key, &r)
				name := strings.TrimSuffix(strings.TrimPrefix(r.Name, prefix), "-role")
				m[kind+"/"+name] = r.Rules
			}
		}
		return m
	}
	g.Expect(rulesOf(chartObjs, "lw-lockwarden-")).To(Equal(rulesOf(kustObjs, "lockwarden-")))

	var cd, kd appsv1.Deployment
	chartObjs.get(t, "Deployment/lw-lockwarden", &cd)
	kustObjs.get(t, "Deployment/lockwarden-controller-manager", &kd)
	g.Expect(cd.Spec.Replicas).To(Equal(kd.Spec.Replicas))
	cp, kp := cd.Spec.Template.Spec, kd.Spec.Template.Spec
	g.Expect(cp.SecurityContext).To(Equal(kp.SecurityContext))
	g.Expect(cp.TerminationGracePeriodSeconds).To(Equal(kp.TerminationGracePeriodSeconds))
	g.Expect(cp.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.TopologyKey).
		To(Equal(kp.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.TopologyKey))
	cc, kc := cp.Containers[0], kp.Containers[0]
	g.Expect(cc.Command).To(Equal(kc.Command))
	g.Expect(cc.Args).To(ContainElements(kc.Args), "the chart passes every flag make deploy passes")
	g.Expect(cc.Env).To(Equal(kc.Env))
	g.Expect(cc.Ports).To(Equal(kc.Ports))
	g.Expect(cc.LivenessProbe).To(Equal(kc.LivenessProbe))
	g.Expect(cc.ReadinessProbe).To(Equal(kc.ReadinessProbe))
	g.Expect(cc.Resources).To(Equal(kc.Resources))
	g.Expect(cc.SecurityContext).To(Equal(kc.SecurityContext))

	var cpdb, kpdb policyv1.PodDisruptionBudget
	chartObjs.get(t, "PodDisruptionBudget/lw-lockwarden", &cpdb)
	kustObjs.get(t, "PodDisruptionBudget/lockwarden-controller-manager", &kpdb)
	g.Expect(cpdb.Spec.MinAvailable).To(Equal(kpdb.Spec.MinAvailable))

	var cs, ks corev1.Service
	chartObjs.get(t, "Service/lw-lockwarden-metrics", &cs)
	kustObjs.get(t, "Service/lockwarden-controller-manager-metrics", &ks)
	g.Expect(cs.Spec.Ports).To(Equal(ks.Spec.Ports))

	g.Expect(chartObjs.ofKind("CustomResourceDefinition")).To(ConsistOf(kustObjs.ofKind("CustomResourceDefinition")))

	// The same admission policies (the pods' and the Jobs'), and bindings that name them after
	// kustomize's namePrefix.
	g.Expect(kustObjs.ofKind("MutatingAdmissionPolicy")).To(HaveLen(len(chartObjs.ofKind("MutatingAdmissionPolicy"))))
	for _, p := range []struct{ chartPolicy, chartBinding, name string }{
		{policyKey, bindingKey, "lockwarden-pod-scheduling-gate"},
		{jobPolicyKey, jobBindingKey, "lockwarden-job-suspend"},
	} {
		var cmap, kmap admissionregistrationv1.MutatingAdmissionPolicy
		chartObjs.get(t, p.chartPolicy, &cmap)
		kustObjs.get(t, "MutatingAdmissionPolicy/"+p.name, &kmap)
		g.Expect(cmap.Spec).To(Equal(kmap.Spec), p.name)
		var cbinding, kbinding admissionregistrationv1.MutatingAdmissionPolicyBinding
		chartObjs.get(t, p.chartBinding, &cbinding)
		kustObjs.get(t, "MutatingAdmissionPolicyBinding/"+p.name, &kbinding)
		g.Expect(kbinding.Spec.PolicyName).To(Equal(kmap.Name), p.name)
		g.Expect(kbinding.Spec.MatchResources).To(Equal(cbinding.Spec.MatchResources), p.name)
	}
	// And the same policy on claims that name a pod.
	g.Expect(kustObjs.ofKind("ValidatingAdmissionPolicy")).To(HaveLen(len(chartObjs.ofKind("ValidatingAdmissionPolicy"))))
	var cvap, kvap admissionregistrationv1.ValidatingAdmissionPolicy
	chartObjs.get(t, holderPolicyKey, &cvap)
	kustObjs.get(t, "ValidatingAdmissionPolicy/lockwarden-claim-holder-pod", &kvap)
	g.Expect(cvap.Spec).To(Equal(kvap.Spec))
	var cvb, kvb admissionregistrationv1.ValidatingAdmissionPolicyBinding
	chartObjs.get(t, holderBindingKey, &cvb)
	kustObjs.get(t, "ValidatingAdmissionPolicyBinding/lockwarden-claim-holder-pod", &kvb)
	g.Expect(kvb.Spec.PolicyName).To(Equal(kvap.Name))
	g.Expect(kvb.Spec.ValidationActions).To(Equal(cvb.Spec.ValidationActions))
	g.Expect(kvb.Spec.MatchResources).To(Equal(cvb.Spec.MatchResources))
	// And the same limits on the controller's pod updates, for its own account under each: the
	// chart's (release lw in locks) and make deploy's.
	var cpe, kpe admissionregistrationv1.ValidatingAdmissionPolicy
	chartObjs.get(t, podEditsPolicyKey, &cpe)
	kustObjs.get(t, "ValidatingAdmissionPolicy/lockwarden-controller-pod-edits", &kpe)
	g.Expect(kpe.Spec.MatchConditions[0].Expression).To(Equal("'system:serviceaccount:lockwarden-system:" + kd.Spec.Template.Spec.ServiceAccountName + ":' == request.userInfo.username + ':'"))
	g.Expect(cpe.Spec.MatchConditions[0].Expression).To(Equal("'system:serviceaccount:locks:" + cd.Spec.Template.Spec.ServiceAccountName + ":' == request.userInfo.username + ':'"))
	cpe.Spec.MatchConditions, kpe.Spec.MatchConditions = nil, nil
	g.Expect(cpe.Spec).To(Equal(kpe.Spec))
}

// TestWorkloadKinds checks that the workloads values list the kinds to the manager and grant it
// read access to exactly those, Jobs always.
func TestWorkloadKinds(t *testing.T) {
	rulesOn := func(objs objects) map[string][]string {
		var role rbacv1.ClusterRole
		objs.get(t, "ClusterRole/lw-lockwarden-manager", &role)
		on := map[string][]string{}
		for _, r := range role.Rules {
			for _, group := range r.APIGroups {
				for _, res := range r.Resources {
					on[group+"/"+res] = r.Verbs
				}
			}
		}
		return on
	}
	kindsFlag := func(objs objects) string {
		var d appsv1.Deployment
		objs.get(t, "Deployment/lw-lockwarden", &d)
		for _, a := range d.Spec.Template.Spec.Containers[0].Args {
			if v, ok := strings.CutPrefix(a, "--workload-kinds="); ok {
				return v
			}
		}
		return "(none)"
	}
	t.Run("Jobs by default", func(t *testing.T) {
		g := NewWithT(t)
		objs := render(t)
		g.Expect(kindsFlag(objs)).To(Equal("batch/v1/Job"))
		rules := rulesOn(objs)
		g.Expect(rules).To(HaveKeyWithValue("batch/jobs", []string{"list", "patch", "watch"}))
		g.Expect(rules).NotTo(HaveKey("tekton.dev/pipelineruns"))
		g.Expect(rules).NotTo(HaveKey("argoproj.io/workflows"))
	})
	t.Run("Tekton, Argo Workflows and other kinds", func(t *testing.T) {
		g := NewWithT(t)
		objs := render(t, "--set", "workloads.tekton=true", "--set", "workloads.argoWorkflows=true",
			"--set", "workloads.extraKinds[0].apiVersion=example.com/v1", "--set", "workloads.extraKinds[0].kind=Backup",
			"--set", "workloads.extraKinds[0].resource=backups",
			"--set", "workloads.extraKinds[1].apiVersion=v1", "--set", "workloads.extraKinds[1].kind=ConfigMap",
			"--set", "workloads.extraKinds[1].resource=configmaps")
		g.Expect(kindsFlag(objs)).To(Equal("batch/v1/Job,tekton.dev/v1/PipelineRun,tekton.dev/v1/TaskRun," +
			"argoproj.io/v1alpha1/Workflow,example.com/v1/Backup,v1/ConfigMap"))
		rules := rulesOn(objs)
		for _, res := range []string{"batch/jobs", "tekton.dev/pipelineruns", "argoproj.io/workflows"} {
			g.Expect(rules).To(HaveKeyWithValue(res, []string{"list", "patch", "watch"}), res)
		}
		for _, res := range []string{"tekton.dev/taskruns", "example.com/backups", "/configmaps"} {
			g.Expect(rules).To(HaveKeyWithValue(res, []string{"list", "watch"}), res)
		}
	})
}

// TestKustomizePodEditsPolicyFollowsTheServiceAccount: make deploy's policy on the controller's pod
// updates names the controller's ServiceAccount by the namespace and name config/default gives it,
// so that a namespace or namePrefix of one's own keeps the policy on (a condition naming an
// account that does not exist would judge no request at all).
func TestKustomizePodEditsPolicyFollowsTheServiceAccount(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	if out, err := exec.Command("cp", "-r", filepath.Join("..", "config"), dir).CombinedOutput(); err != nil {
		t.Fatalf("copying config: %v\n%s", err, out)
	}
	kustomization := filepath.Join(dir, "config", "default", "kustomization.yaml")
	k, err := os.ReadFile(kustomization)
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(strings.Replace(string(k), "namespace: lockwarden-system", "namespace: locking", 1), "namePrefix: lockwarden-", "namePrefix: team-", 1)
	g.Expect(changed).NotTo(Equal(string(k)))
	g.Expect(os.WriteFile(kustomization, []byte(changed), 0o644)).To(Succeed())
	out, err := run(t, "kubectl", "kustomize", filepath.Join(dir, "config", "default"))
	if err != nil {
		t.Fatalf("kubectl kustomize: %v\n%s", err, out)
	}
	objs := parse(t, out)
	var sa corev1.ServiceAccount
	objs.get(t, "ServiceAccount/team-controller-manager", &sa)
	g.Expect(sa.Namespace).To(Equal("locking"))
	var policy admissionregistrationv1.ValidatingAdmissionPolicy
	objs.get(t, "ValidatingAdmissionPolicy/team-controller-pod-edits", &policy)
	g.Expect(policy.Spec.MatchConditions).To(HaveLen(1))
	g.Expect(policy.Spec.MatchConditions[0].Expression).To(Equal("'system:serviceaccount:locking:team-controller-manager:' == request.userInfo.username + ':'"))
}
