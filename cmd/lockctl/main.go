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

// Command lockctl asks lockwarden for distributed locks from init containers, scripts and
// shells: acquire (for its own pod), run (hold a lock while a command runs), wait, release,
// status and version. Installed as kubectl-lock it is the kubectl plugin `kubectl lock`. See
// docs/lockctl.md.
package main

import (
	"os"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"

	_ "k8s.io/client-go/plugin/pkg/client/auth" // kubeconfig auth plugins (OIDC, exec)
)

func main() {
	// A failure is one line on stderr; client-go's logs of what it retries (a watch the API server
	// ended or refused) are not failures.
	klog.SetLogger(logr.Discard())
	a := &app{stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv, prog: programName(os.Args[0])}
	os.Exit(a.main(os.Args[1:]))
}
