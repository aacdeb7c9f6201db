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
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
	"github.com/lockwarden/lockwarden/internal/testutil/syncbuf"
	"github.com/lockwarden/lockwarden/internal/version"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"
)

// TestMetricsEndpointNeedsAnAuthorizedToken runs the manager as cmd/manager builds it, with the
// default metrics flags and a certificate from --metrics-cert-path, against a real API server, as
// the ServiceAccount that config/rbac binds its roles to. A scrape without a token is refused, so
// is one whose user may not get /metrics; a ServiceAccount bound to config/rbac's metrics-reader
// ClusterRole reads lockwarden's metrics. The API server checks the tokens, so the manager's
// ServiceAccount succeeding also shows that metrics-auth-role grants what the check needs.
func TestMetricsEndpointNeedsAnAuthorizedToken(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set, so there is no kube-apiserver to test against. " +
			"Run: export KUBEBUILDER_ASSETS=$(hack/k8s-binaries.sh envtest-dir)   (or use make test-unit)")
	}
	g := NewWithT(t)
	repoRoot := filepath.Join("..", "..")
	// envtest configures the API server to sign ServiceAccount tokens, so TokenRequest and
	// TokenReview work as in a cluster.
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(repoRoot, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	adminCfg, err := env.Start()
	g.Expect(err).NotTo(HaveOccurred(), "starting envtest")
	t.Cleanup(func() { _ = env.Stop() })
	admin, err := client.New(adminCfg, client.Options{Scheme: newScheme()})
	g.Expect(err).NotTo(HaveOccurred())
	ctx := t.Context()

	// config/rbac as make deploy applies it, without kustomize's name prefix: its namespaced
	// objects and subjects name the namespace "system", which the test creates.
	const managerNS, managerSA = "system", "controller-manager"
	g.Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNS}})).To(Succeed())
	applyKustomization(t, admin, filepath.Join(repoRoot, "config", "rbac"))

	// Scrapers: one bound to the metrics-reader ClusterRole, one bound to nothing.
	const scrapersNS = "monitoring"
	g.Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: scrapersNS}})).To(Succeed())
	for _, name := range []string{"prometheus", "nobody"} {
		g.Expect(admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: scrapersNS, Name: name}})).To(Succeed())
	}
	g.Expect(admin.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: scrapersNS, Name: "prometheus"}},
	})).To(Succeed())
	clientset, err := kubernetes.NewForConfig(adminCfg)
	g.Expect(err).NotTo(HaveOccurred())
	token := func(sa string) string {
		t.Helper()
		tr, err := clientset.CoreV1().ServiceAccounts(scrapersNS).CreateToken(ctx, sa,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}},
			metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("requesting a token for %s: %v", sa, err)
		}
		return tr.Status.Token
	}
	readerToken, otherToken := token("prometheus"), token("nobody")

	// The certificate the manager must serve: a CA the client trusts, and a certificate it signed.
	certDir := t.TempDir()
	caPool := writeServingCert(t, certDir)

	metricsAddr := freeLoopbackAddr(t)
	o, err := parseFlags([]string{"--metrics-bind-address=" + metricsAddr, "--health-probe-bind-address=0",
		"--secret-namespace=" + managerNS, "--metrics-cert-path=" + certDir})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.metricsSecure).To(BeTrue(), "metrics are secure by default")

	var logs syncbuf.Buffer
	ctrl.SetLogger(zap.New(zap.WriteTo(&logs), zap.UseDevMode(true)))
	managerCfg := rest.CopyConfig(adminCfg)
	managerCfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + managerNS + ":" + managerSA}
	scheme := newScheme()
	mgr, err := newManager(managerCfg, scheme, o)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(setupControllers(mgr, managerCfg, scheme, o)).To(Succeed())
	mgrCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mgrCtx) }()
	t.Cleanup(func() {
		stop()
		<-done //nolint:errcheck // waits until the manager has stopped; the error it stops with is not this test's
		if t.Failed() {
			t.Logf("manager log:\n%s", logs.String())
		}
	})

	url := "https://" + metricsAddr + "/metrics"
	scrape := func(token string) (int, string, error) {
		c := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: caPool, ServerName: "localhost", MinVersion: tls.VersionTLS12},
		}}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, "", err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	status := func(token string) func() (int, error) {
		return func() (int, error) {
			code, _, err := scrape(token)
			return code, err
		}
	}

	// The server starts in the background; the first answer also proves the client trusted the
	// certificate from --metrics-cert-path, not one generated by the server.
	g.Eventually(status("")).WithTimeout(30*time.Second).Should(Equal(http.StatusUnauthorized), "no token")
	// controller-runtime's filter answers a token that the TokenReview rejects with 500, as an
	// authentication error, not 401; docs/metrics.md says so. What matters is that no metrics go out.
	g.Expect(status("not-a-token")()).To(Equal(http.StatusInternalServerError), "a token the API server does not accept")
	g.Expect(status(otherToken)()).To(Equal(http.StatusForbidden), "a ServiceAccount without metrics-reader")

	// The claims gauge is counted from the manager's cache at scrape time, so it appears once the
	// manager's own permissions let the cache sync.
	g.Eventually(func(g Gomega) {
		code, body, err := scrape(readerToken)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(code).To(Equal(http.StatusOK), "a ServiceAccount bound to metrics-reader: %s", body)
		g.Expect(body).To(MatchRegexp(`(?m)^lockwarden_claims\{phase="Held"\} 0$`))
		g.Expect(body).To(ContainSubstring("controller_runtime_reconcile_total"))
	}).WithTimeout(30 * time.Second).Should(Succeed())

	t.Run("build info", func(t *testing.T) {
		_, body, err := scrape(readerToken)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		v := version.Get()
		NewWithT(t).Expect(body).To(ContainSubstring(fmt.Sprintf("\nlockwarden_build_info{commit=%q,goversion=%q,version=%q} 1\n",
			v.Commit, v.GoVersion, v.Version)))
	})

	t.Run("ages of the waits and holds still going", func(t *testing.T) {
		// Two detached claims on one lock of the built-in backend: the first is granted and holds
		// until deleted, the second waits behind it.
		g := NewWithT(t)
		const ns = "apps"
		g.Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		g.Expect(admin.Create(ctx, &locksv1alpha1.DistributedLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}})).To(Succeed())
		for _, name := range []string{"first", "second"} {
			g.Expect(admin.Create(ctx, &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: locksv1alpha1.LockClaimSpec{LockName: "db"}})).To(Succeed())
			if name == "first" {
				g.Eventually(func() (locksv1alpha1.ClaimPhase, error) {
					c := &locksv1alpha1.LockClaim{}
					err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, c)
					return c.Status.Phase, err
				}).WithTimeout(30*time.Second).Should(Equal(locksv1alpha1.ClaimHeld), "the first claim is granted")
			}
		}
		gauge := func(body, name string) (float64, bool) {
			m := regexp.MustCompile(`(?m)^` + name + `\{backend="kubernetes"\} (\S+)$`).FindStringSubmatch(body)
			if m == nil {
				return 0, false
			}
			v, err := strconv.ParseFloat(m[1], 64)
			return v, err == nil
		}
		var pending, held float64
		g.Eventually(func(g Gomega) {
			_, body, err := scrape(readerToken)
			g.Expect(err).NotTo(HaveOccurred())
			var ok bool
			pending, ok = gauge(body, "lockwarden_claim_oldest_pending_seconds")
			g.Expect(ok).To(BeTrue(), "the waiting claim's age: %s", body)
			held, ok = gauge(body, "lockwarden_lock_oldest_held_seconds")
			g.Expect(ok).To(BeTrue(), "the hold's age: %s", body)
		}).WithTimeout(30 * time.Second).Should(Succeed())
		g.Expect(pending).To(BeNumerically(">=", 0))
		g.Expect(held).To(BeNumerically(">=", 0))

		// The ages are measured when scraped, so they grow while the wait and the hold go on.
		time.Sleep(1100 * time.Millisecond)
		_, body, err := scrape(readerToken)
		g.Expect(err).NotTo(HaveOccurred())
		later, ok := gauge(body, "lockwarden_claim_oldest_pending_seconds")
		g.Expect(ok).To(BeTrue())
		g.Expect(later).To(BeNumerically(">=", pending+1))
		later, ok = gauge(body, "lockwarden_lock_oldest_held_seconds")
		g.Expect(ok).To(BeTrue())
		g.Expect(later).To(BeNumerically(">=", held+1))

		// Once nothing waits or holds on the backend, its series go rather than read 0.
		for _, name := range []string{"second", "first"} {
			g.Expect(admin.Delete(ctx, &locksv1alpha1.LockClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).To(Succeed())
		}
		g.Eventually(func(g Gomega) {
			_, body, err := scrape(readerToken)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(body).NotTo(ContainSubstring("lockwarden_claim_oldest_pending_seconds{"))
			g.Expect(body).NotTo(ContainSubstring("lockwarden_lock_oldest_held_seconds{"))
		}).WithTimeout(30 * time.Second).Should(Succeed())
	})

	t.Run("plain HTTP is refused", func(t *testing.T) {
		c := http.Client{Timeout: 5 * time.Second}
		resp, err := c.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			// Go's TLS server answers plain HTTP with 400 and closes the connection, which the
			// client may see as a reset before it reads the answer.
			return
		}
		defer resp.Body.Close()
		NewWithT(t).Expect(resp.StatusCode).To(Equal(http.StatusBadRequest))
	})
}

// applyKustomization creates every object in the files a kustomization.yaml lists as resources.
func applyKustomization(t *testing.T, c client.Client, dir string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatalf("%s/kustomization.yaml: %v", dir, err)
	}
	for _, file := range k.Resources {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if len(obj.Object) == 0 {
				continue
			}
			if err := c.Create(t.Context(), obj); err != nil {
				t.Fatalf("%s: creating %s %s: %v", file, obj.GetKind(), obj.GetName(), err)
			}
		}
	}
}

// writeServingCert writes tls.crt and tls.key for localhost and 127.0.0.1 into dir, signed by a
// new CA, and returns a pool with only that CA.
func writeServingCert(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	// The certificate PEM holds the serving certificate followed by the CA that signed it.
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKeyWithFixtures("localhost", []net.IP{net.IPv4(127, 0, 0, 1)}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	leaf, rest := pem.Decode(certPEM)
	ca, _ := pem.Decode(rest)
	if leaf == nil || ca == nil {
		t.Fatal("expected a certificate and its CA")
	}
	caCert, err := x509.ParseCertificate(ca.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return pool
}

// freeLoopbackAddr returns a loopback address whose port was free a moment ago.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
