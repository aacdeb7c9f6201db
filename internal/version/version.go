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

// Package version tells which build of lockwarden is running. The release build stamps it at
// link time; hack/ldflags.sh prints the flags, which `make build`, the Dockerfile and the hack
// scripts pass to go build:
//
//	-X github.com/lockwarden/lockwarden/internal/version.version=0.1.0
//	-X github.com/lockwarden/lockwarden/internal/version.commit=<git commit>
//	-X github.com/lockwarden/lockwarden/internal/version.date=<build time, RFC 3339>
//
// A build without them (go build, go run, go install) falls back to what the Go toolchain
// recorded in the binary: the module version and the VCS revision, else "dev" and "unknown".
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set by -ldflags -X at link time; empty in an unstamped build.
var (
	version string
	commit  string
	date    string
)

// Fallbacks when neither the linker nor the Go toolchain recorded a value.
const (
	// DevVersion is the version of a build that was not stamped and has no module version.
	DevVersion = "dev"
	// Unknown stands for a commit or build date nothing recorded.
	Unknown = "unknown"
)

// Info describes one build.
type Info struct {
	// Version is the release (VERSION at the repository root, e.g. 0.1.0), the module version of
	// an unstamped build, or "dev".
	Version string `json:"version"`
	// Commit is the git commit built, with "-dirty" when the tree had uncommitted changes.
	Commit string `json:"commit"`
	// BuildDate is when the binary was built, RFC 3339; "unknown" in an unstamped build.
	BuildDate string `json:"buildDate"`
	// GoVersion is the Go toolchain that built the binary, e.g. go1.26.0.
	GoVersion string `json:"goVersion"`
	// Platform is the binary's GOOS/GOARCH.
	Platform string `json:"platform"`
}

// Get returns this binary's build information.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return resolve(Info{Version: version, Commit: commit, BuildDate: date}, bi)
}

// String is the one line a --version flag prints, e.g.
// "0.1.0 (commit 3f2a9b1c, built 2026-12-02T06:16:00Z, go1.26.0 linux/amd64)".
func (i Info) String() string {
	return fmt.Sprintf("%s (commit %s, built %s, %s %s)", i.Version, i.Commit, i.BuildDate, i.GoVersion, i.Platform)
}

// resolve fills what the linker did not stamp from the build information the Go toolchain
// recorded (bi may be nil), then from the fallbacks.
func resolve(stamped Info, bi *debug.BuildInfo) Info {
	out := stamped
	out.GoVersion, out.Platform = runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH
	var revision, modified string
	if bi != nil {
		if out.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			out.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
	}
	if out.Commit == "" && revision != "" {
		out.Commit = revision
		if modified == "true" {
			out.Commit += "-dirty"
		}
	}
	if out.Version == "" {
		out.Version = DevVersion
	}
	if out.Commit == "" {
		out.Commit = Unknown
	}
	if out.BuildDate == "" {
		out.BuildDate = Unknown
	}
	return out
}
