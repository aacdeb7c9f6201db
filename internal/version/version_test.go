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

package version

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestResolve(t *testing.T) {
	vcs := func(revision, modified string) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: revision}, {Key: "vcs.modified", Value: modified},
			{Key: "vcs.time", Value: "2026-12-01T10:00:00Z"},
		}}
	}
	cases := []struct {
		name    string
		stamped Info
		bi      *debug.BuildInfo
		want    Info
	}{
		{
			name:    "stamped by make build: the stamp wins over the toolchain's record",
			stamped: Info{Version: "0.1.0", Commit: "3f2a9b1c", BuildDate: "2026-12-02T06:16:00Z"},
			bi:      vcs("ffffffff", "true"),
			want:    Info{Version: "0.1.0", Commit: "3f2a9b1c", BuildDate: "2026-12-02T06:16:00Z"},
		},
		{
			name: "go build in a clean checkout: the VCS revision",
			bi:   vcs("3f2a9b1c", "false"),
			want: Info{Version: DevVersion, Commit: "3f2a9b1c", BuildDate: Unknown},
		},
		{
			name: "go build with uncommitted changes",
			bi:   vcs("3f2a9b1c", "true"),
			want: Info{Version: DevVersion, Commit: "3f2a9b1c-dirty", BuildDate: Unknown},
		},
		{
			name: "go install of a tagged module: its version",
			bi:   &debug.BuildInfo{Main: debug.Module{Version: "v0.1.0"}},
			want: Info{Version: "v0.1.0", Commit: Unknown, BuildDate: Unknown},
		},
		{
			name:    "only the version stamped (a Docker build without git)",
			stamped: Info{Version: "0.2.0-rc.1"},
			bi:      &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}},
			want:    Info{Version: "0.2.0-rc.1", Commit: Unknown, BuildDate: Unknown},
		},
		{
			name: "no build information at all",
			want: Info{Version: DevVersion, Commit: Unknown, BuildDate: Unknown},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.want.GoVersion, tc.want.Platform = runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH
			if got := resolve(tc.stamped, tc.bi); got != tc.want {
				t.Errorf("resolve() =\n  %+v\nwant\n  %+v", got, tc.want)
			}
		})
	}
}

func TestString(t *testing.T) {
	i := Info{Version: "0.1.0", Commit: "3f2a9b1c", BuildDate: "2026-12-02T06:16:00Z", GoVersion: "go1.26.0", Platform: "linux/amd64"}
	want := "0.1.0 (commit 3f2a9b1c, built 2026-12-02T06:16:00Z, go1.26.0 linux/amd64)"
	if got := i.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// A test binary is not stamped: Get must still name a version and a commit, never an empty
// string that would make an empty metric label or a blank line.
func TestGetUnstamped(t *testing.T) {
	i := Get()
	if i.Version == "" || i.Commit == "" || i.BuildDate == "" || i.GoVersion != runtime.Version() {
		t.Errorf("Get() = %+v: every field must be set", i)
	}
}
