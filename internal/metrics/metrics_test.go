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

package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lockwarden/lockwarden/internal/version"
)

func TestBuildInfo(t *testing.T) {
	info := version.Info{Version: "0.1.0", Commit: "3f2a9b1c", BuildDate: "2026-12-02T06:16:00Z", GoVersion: "go1.26.0", Platform: "linux/amd64"}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(NewBuildInfo(info)); err != nil {
		t.Fatal(err)
	}
	// Registering it twice in one registry is refused, as for every other collector.
	if err := reg.Register(NewBuildInfo(info)); err == nil {
		t.Error("a second lockwarden_build_info was accepted")
	}
	want := `
# HELP lockwarden_build_info The running lockwarden build: always 1, labelled with its version, git commit and Go version.
# TYPE lockwarden_build_info gauge
lockwarden_build_info{commit="3f2a9b1c",goversion="go1.26.0",version="0.1.0"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "lockwarden_build_info"); err != nil {
		t.Error(err)
	}
}
