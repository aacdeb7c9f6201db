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
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/lockwarden/lockwarden/internal/version"
)

// lockctl version answers without a cluster: a kubeconfig that does not exist changes nothing.
func TestVersion(t *testing.T) {
	want := version.Get()
	env := map[string]string{"KUBECONFIG": "/nonexistent/kubeconfig"}
	run := func(t *testing.T, args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		a := &app{stdout: &stdout, stderr: &stderr, getenv: func(k string) string { return env[k] }}
		if code := a.main(args); code != exitOK || stderr.Len() != 0 {
			t.Fatalf("lockctl %s: exit %d, stderr %q", strings.Join(args, " "), code, stderr.String())
		}
		return stdout.String()
	}

	for _, args := range [][]string{{"version"}, {"--version"}, {"version", "-o", "text"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			got := run(t, args...)
			for _, line := range []string{
				"Version:     " + want.Version + "\n",
				"Commit:      " + want.Commit + "\n",
				"Built:       " + want.BuildDate + "\n",
				"Go:          " + want.GoVersion + " " + want.Platform + "\n",
			} {
				if !strings.Contains(got, line) {
					t.Errorf("output lacks %q:\n%s", line, got)
				}
			}
		})
	}
	t.Run("json", func(t *testing.T) {
		var got version.Info
		if err := json.Unmarshal([]byte(run(t, "version", "-o", "json")), &got); err != nil || got != want {
			t.Errorf("version -o json = %+v (%v), want %+v", got, err, want)
		}
	})
	t.Run("yaml", func(t *testing.T) {
		var got version.Info
		if err := yaml.Unmarshal([]byte(run(t, "version", "--output=yaml")), &got); err != nil || got != want {
			t.Errorf("version -o yaml = %+v (%v), want %+v", got, err, want)
		}
	})
}
