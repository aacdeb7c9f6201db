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

// Package workloadcrds gives tests the CustomResourceDefinitions of the workload kinds that
// lockwarden knows besides Jobs: Tekton's PipelineRun and TaskRun (and the Pipeline and Task they
// run) and Argo's Workflow, read from
// the manifests those projects publish in their own Go modules (fetched through the Go module
// proxy into the module cache, at pinned versions), so that tests create objects the real API
// would accept. No Tekton or Argo controller runs: tests drive the objects' status as theirs
// would.
package workloadcrds

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// The modules and files the CRDs come from. The versions are pinned, so that a test run does not
// change with a release upstream.
var sources = []struct {
	module, version string
	files           []string
}{
	{"github.com/tektoncd/pipeline", "v1.6.0", []string{
		"config/300-crds/300-pipelinerun.yaml",
		"config/300-crds/300-taskrun.yaml",
		// What the runs refer to, for samples that create them beside their runs.
		"config/300-crds/300-pipeline.yaml",
		"config/300-crds/300-task.yaml",
	}},
	{"github.com/argoproj/argo-workflows/v3", "v3.7.3", []string{
		// The CRD that Argo's own install applies: the schema of a Workflow is left open.
		"manifests/base/crds/minimal/argoproj.io_workflows.yaml",
	}},
}

// Load returns the CRDs, each without its conversion webhook (Tekton's converts v1beta1
// objects through a webhook that does not run here; tests use the storage version only).
func Load() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, src := range sources {
		dir, err := moduleDir(src.module, src.version)
		if err != nil {
			return nil, err
		}
		for _, f := range src.files {
			data, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				return nil, fmt.Errorf("%s@%s: %w", src.module, src.version, err)
			}
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := yaml.UnmarshalStrict(data, crd); err != nil {
				return nil, fmt.Errorf("%s@%s %s: %w", src.module, src.version, f, err)
			}
			crd.Spec.Conversion = nil
			crds = append(crds, crd)
		}
	}
	return crds, nil
}

// moduleDir downloads module@version into the module cache (at once when it is there already)
// and returns its directory. It runs outside this repository's module, so that go.mod and go.sum
// stay as they are: the module is read, never built.
func moduleDir(module, version string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", module+"@"+version)
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GO111MODULE=on", "GOFLAGS=-mod=mod")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	if jsonErr := json.Unmarshal(out, &info); jsonErr == nil && info.Error != "" {
		return "", fmt.Errorf("go mod download %s@%s: %s", module, version, info.Error)
	}
	if err != nil || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: %v: %s%s", module, version, err, out, stderr.Bytes())
	}
	return info.Dir, nil
}
