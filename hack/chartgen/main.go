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

// Command chartgen writes the parts of the Helm chart and its docs that are derived from other
// files, so that they cannot drift from them:
//
//   - charts/lockwarden/templates/crds/: the CRDs from config/crd/bases, switchable with
//     crds.enabled and kept on uninstall with crds.keep;
//   - charts/lockwarden/templates/_rules.tpl: the RBAC rules of config/rbac (the controller's
//     ClusterRole is generated from the markers in internal/controller), one named template each;
//   - charts/lockwarden/templates/_admission.tpl: the specs of the admission policies in
//     config/admission, which gate pods and suspend Jobs annotated locks.lockwarden.io/lock and
//     decide who may name a pod as a claim's holder, one named template each;
//   - charts/lockwarden/values.schema.json, from charts/lockwarden/values.yaml: each key's type from
//     its default, its description from the comment above it, and the constraints a default cannot
//     show from the `# @schema {...}` annotation lines in that comment (see schema.go);
//   - the values table, from the same comments without the annotations, in docs/install.md and in
//     charts/lockwarden/README.md, which also shows Chart.yaml's name, description and versions
//     and the install commands of docs/install.md.
//
// `make manifests` runs it after controller-gen; `make verify` fails when its output changes, and
// so does `go test ./hack/chartgen/`, which generates in memory and compares with the files.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

const (
	chartDir       = "charts/lockwarden"
	crdSrcDir      = "config/crd/bases"
	rbacSrcDir     = "config/rbac"
	admissionSrc   = "config/admission/mutating_admission_policy.yaml"
	jobSuspendSrc  = "config/admission/job_suspend_policy.yaml"
	claimHolderSrc = "config/admission/claim_holder_policy.yaml"
	podEditsSrc    = "config/admission/controller_pod_edits_policy.yaml"
	installDocPath = "docs/install.md"
)

// admissionSources names the chart's admission policy spec templates, the kustomize policy each
// is copied from, its kind, and what the policy does, for the template's comment.
var admissionSources = []struct{ template, file, kind, does string }{
	{"lockwarden.admissionPolicySpec", admissionSrc, mutatingPolicy, "gates pods annotated locks.lockwarden.io/lock"},
	{"lockwarden.jobSuspendPolicySpec", jobSuspendSrc, mutatingPolicy, "suspends Jobs created with the annotation locks.lockwarden.io/lock"},
	{"lockwarden.claimHolderPolicySpec", claimHolderSrc, validatingPolicy, "refuses a claim naming a pod unless made from that pod or by someone who may evict it"},
	{"lockwarden.podEditsPolicySpec", podEditsSrc, validatingPolicy, "limits the controller's pod updates to the fields it writes"},
}

// kustomizeControllerUser is the user name of the controller's ServiceAccount under make deploy
// (config/default's namespace and namePrefix), which a policy that judges the controller's own
// requests names; the chart names its own account there instead (chartControllerUser).
const (
	kustomizeControllerUser = "system:serviceaccount:lockwarden-system:lockwarden-controller-manager"
	chartControllerUser     = `system:serviceaccount:{{ .Release.Namespace }}:{{ include "lockwarden.serviceAccountName" . }}`
)

// The kinds of admission policy that admissionSources copies.
const (
	mutatingPolicy   = "MutatingAdmissionPolicy"
	validatingPolicy = "ValidatingAdmissionPolicy"
)

// ruleSources names the chart's rule templates and the kustomize RBAC object each is copied from.
var ruleSources = []struct{ template, file, object string }{
	{"lockwarden.rules.manager", "role.yaml", "manager-role"},
	{"lockwarden.rules.leaderElection", "leader_election_role.yaml", "leader-election-role"},
	{"lockwarden.rules.namespace", "namespace_role.yaml", "namespace-role"},
	{"lockwarden.rules.lockEditor", "lock_user_roles.yaml", "lock-editor-role"},
	{"lockwarden.rules.lockViewer", "lock_user_roles.yaml", "lock-viewer-role"},
	{"lockwarden.rules.metricsAuth", "metrics_auth_role.yaml", "metrics-auth-role"},
	{"lockwarden.rules.metricsReader", "metrics_reader_role.yaml", "metrics-reader"},
}

func main() {
	root := flag.String("root", ".", "repository root")
	flag.Parse()
	if err := run(*root); err != nil {
		fmt.Fprintln(os.Stderr, "chartgen:", err)
		os.Exit(1)
	}
}

// run writes every generated file that changed and removes the chart's copies of CRDs that no
// longer exist.
func run(root string) error {
	outs, err := generate(root)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(root, chartDir, "templates", "crds"), 0o755); err != nil {
		return err
	}
	for _, o := range outs {
		if err := writeIfChanged(filepath.Join(root, o.path), o.content); err != nil {
			return err
		}
	}
	stale, err := staleCRDs(root, outs)
	if err != nil {
		return err
	}
	for _, f := range stale {
		if err := os.Remove(filepath.Join(root, f)); err != nil {
			return err
		}
	}
	return nil
}

// output is one generated file: its path from the repository root and its content.
type output struct {
	path    string
	content []byte
}

// generate returns every file chartgen writes, without writing any.
func generate(root string) ([]output, error) {
	var outs []output
	for _, step := range []func(string) ([]output, error){crdOutputs, rulesOutput, admissionOutput, valuesOutputs} {
		o, err := step(root)
		if err != nil {
			return nil, err
		}
		outs = append(outs, o...)
	}
	return outs, nil
}

// crdOutputs copies every CRD into the chart's templates, wrapped so that crds.enabled switches it
// and crds.keep adds the resource policy that makes `helm uninstall` leave it.
func crdOutputs(root string) ([]output, error) {
	srcs, err := filepath.Glob(filepath.Join(root, crdSrcDir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var outs []output
	for _, src := range srcs {
		in, err := os.ReadFile(src)
		if err != nil {
			return nil, err
		}
		out, err := crdTemplate(filepath.Base(src), in)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src, err)
		}
		outs = append(outs, output{filepath.Join(chartDir, "templates", "crds", filepath.Base(src)), out})
	}
	return outs, nil
}

// staleCRDs returns the chart's copies of CRDs that are not among outs: their CRD is gone.
func staleCRDs(root string, outs []output) ([]string, error) {
	dir := filepath.Join(chartDir, "templates", "crds")
	files, err := filepath.Glob(filepath.Join(root, dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var stale []string
	for _, f := range files {
		rel := filepath.Join(dir, filepath.Base(f))
		if !slices.ContainsFunc(outs, func(o output) bool { return o.path == rel }) {
			stale = append(stale, rel)
		}
	}
	return stale, nil
}

func crdTemplate(name string, in []byte) ([]byte, error) {
	text := strings.TrimPrefix(string(in), "---\n")
	// A CRD's descriptions or CEL rules might contain "{{": print it literally, not as an action.
	text = strings.ReplaceAll(text, "{{", `{{ "{{" }}`)
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	var out []string
	metadata, annotations := false, false
	for _, l := range lines {
		out = append(out, l)
		switch {
		case l == "metadata:":
			if metadata {
				return nil, fmt.Errorf("more than one top-level metadata")
			}
			metadata = true
			out = append(out, "  labels:", `    {{- include "lockwarden.labels" . | nindent 4 }}`)
		case metadata && !annotations && l == "  annotations:":
			annotations = true
			out = append(out, "    {{- if .Values.crds.keep }}", "    helm.sh/resource-policy: keep", "    {{- end }}")
		}
	}
	if !metadata || !annotations {
		return nil, fmt.Errorf("expected controller-gen output with metadata.annotations")
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "{{- /* Generated by hack/chartgen from %s/%s: change the API types and run make manifests. */}}\n", crdSrcDir, name)
	b.WriteString("{{- if .Values.crds.enabled }}\n")
	b.WriteString(strings.Join(out, "\n"))
	b.WriteString("\n{{- end }}\n")
	return b.Bytes(), nil
}

// rulesOutput copies the rules of the kustomize RBAC objects into named templates, which the
// chart's RBAC objects include: the chart grants exactly what config/rbac grants.
func rulesOutput(root string) ([]output, error) {
	var b bytes.Buffer
	b.WriteString("{{- /* Generated by hack/chartgen from config/rbac (role.yaml comes from the +kubebuilder:rbac markers): run make manifests. */}}\n")
	for _, s := range ruleSources {
		rules, err := readRules(filepath.Join(root, rbacSrcDir, s.file), s.object)
		if err != nil {
			return nil, err
		}
		y, err := yaml.Marshal(rules)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "\n{{/* From %s/%s (%s). */}}\n{{- define %q -}}\n%s{{- end }}\n", rbacSrcDir, s.file, s.object, s.template, y)
	}
	return []output{{filepath.Join(chartDir, "templates", "_rules.tpl"), b.Bytes()}}, nil
}

// admissionOutput copies the spec of each kustomize admission policy into a named template,
// which the chart's policies include: the chart gates pods, suspends Jobs and judges claims
// exactly as config/admission does. Each spec is read into the API type, strictly, so that a misspelt field
// fails here rather than in a cluster.
func admissionOutput(root string) ([]output, error) {
	var b bytes.Buffer
	files := make([]string, len(admissionSources))
	for i, s := range admissionSources {
		files[i] = s.file
	}
	fmt.Fprintf(&b, "{{- /* Generated by hack/chartgen from %s: edit those files (their comments say why each field is so) and run make manifests. */}}\n", strings.Join(files, " and "))
	for _, s := range admissionSources {
		spec, err := readPolicySpec(filepath.Join(root, s.file), s.kind)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.file, err)
		}
		fmt.Fprintf(&b, "\n{{/* From %s: the spec of the %s that %s. */}}\n", s.file, s.kind, s.does)
		fmt.Fprintf(&b, "{{- define %q -}}\n%s{{- end }}\n", s.template, spec)
	}
	return []output{{filepath.Join(chartDir, "templates", "_admission.tpl"), b.Bytes()}}, nil
}

// readPolicySpec reads the admission policy of the given kind in file and returns its spec as
// YAML, ready to be the body of a named template.
func readPolicySpec(file, kind string) (string, error) {
	in, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	var spec any
	switch kind {
	case mutatingPolicy:
		var policy admissionregistrationv1.MutatingAdmissionPolicy
		if err := yaml.UnmarshalStrict(in, &policy); err != nil {
			return "", err
		}
		if policy.Kind != kind || len(policy.Spec.Mutations) == 0 {
			return "", fmt.Errorf("want a %s with mutations, got kind %q", kind, policy.Kind)
		}
		spec = policy.Spec
	case validatingPolicy:
		var policy admissionregistrationv1.ValidatingAdmissionPolicy
		if err := yaml.UnmarshalStrict(in, &policy); err != nil {
			return "", err
		}
		if policy.Kind != kind || len(policy.Spec.Validations) == 0 {
			return "", fmt.Errorf("want a %s with validations, got kind %q", kind, policy.Kind)
		}
		spec = policy.Spec
	default:
		return "", fmt.Errorf("no such admission policy kind %q", kind)
	}
	y, err := yaml.Marshal(spec)
	if err != nil {
		return "", err
	}
	// A CEL expression might contain "{{": print it literally, not as an action. Then the
	// controller's user name, the one action a spec may need.
	out := strings.ReplaceAll(string(y), "{{", `{{ "{{" }}`)
	return strings.ReplaceAll(out, kustomizeControllerUser, chartControllerUser), nil
}

func readRules(file, object string) ([]rbacv1.PolicyRule, error) {
	in, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(in), -1) {
		var o struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Rules []rbacv1.PolicyRule `json:"rules"`
		}
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if o.Metadata.Name == object {
			if len(o.Rules) == 0 {
				return nil, fmt.Errorf("%s: %s has no rules", file, object)
			}
			return o.Rules, nil
		}
	}
	return nil, fmt.Errorf("%s: no object named %s", file, object)
}

// valuesOutputs generates, from values.yaml, values.schema.json, the values table in
// docs/install.md and the chart's README.
func valuesOutputs(root string) ([]output, error) {
	valuesPath := filepath.Join(chartDir, "values.yaml")
	values, err := os.ReadFile(filepath.Join(root, valuesPath))
	if err != nil {
		return nil, err
	}
	tree, err := parseValues(string(values))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", valuesPath, err)
	}
	schema, err := valuesSchema(tree)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", valuesPath, err)
	}
	table, err := valuesTable(tree)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", valuesPath, err)
	}
	installDoc, err := os.ReadFile(filepath.Join(root, installDocPath))
	if err != nil {
		return nil, err
	}
	newInstallDoc, err := spliceTable(installDoc, table)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", installDocPath, err)
	}
	chartYAML, err := os.ReadFile(filepath.Join(root, chartDir, "Chart.yaml"))
	if err != nil {
		return nil, err
	}
	chart, err := parseChart(chartYAML)
	if err != nil {
		return nil, fmt.Errorf("%s/Chart.yaml: %w", chartDir, err)
	}
	readme, err := chartReadme(chart, newInstallDoc, table)
	if err != nil {
		return nil, err
	}
	return []output{
		{filepath.Join(chartDir, "values.schema.json"), schema},
		{installDocPath, newInstallDoc},
		{filepath.Join(chartDir, "README.md"), []byte(readme)},
	}, nil
}

func writeIfChanged(path string, content []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, content) {
		return nil
	}
	return os.WriteFile(path, content, 0o644)
}
