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

package controller

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lockwarden/lockwarden/internal/workloads"
)

func TestCheckWorkloadKinds(t *testing.T) {
	g := NewWithT(t)
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}, meta.RESTScopeNamespace)

	served, err := workloads.Parse("batch/v1/Job")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(checkWorkloadKinds(mapper, served)).To(Succeed())
	g.Expect(checkWorkloadKinds(mapper, nil)).To(Succeed(), "no kinds listed")

	missing, err := workloads.Parse("batch/v1/Job,tekton.dev/v1/PipelineRun")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(checkWorkloadKinds(mapper, missing)).To(MatchError(HavePrefix(
		"workload kind tekton.dev/v1/PipelineRun is not served by this cluster (install its CRDs first, or leave it out of --workload-kinds, the chart's workloads values): ")))
}
