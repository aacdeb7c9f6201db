//go:build localcluster

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

// Package localcluster checks the local containerless cluster that hack/local-cluster.sh starts
// for make demo, run-local, test-e2e, bench and bench-scale. It is built only with the
// localcluster tag (make test-local-cluster, part of make test), so that `go test ./...` never
// starts a cluster.
package localcluster

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/lockwarden/lockwarden/internal/testutil/listeners"
)

// clusterName is this test's own cluster, so that a cluster from make cluster is left alone.
const clusterName = "lockwarden-loopback"

// components are the processes kwokctl's binary runtime runs for a cluster, named as their pid
// files under the cluster's directory are (pids/<name>.pid).
var components = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok-controller"}

// Every process of the local cluster listens on loopback alone, as the kernel sees it: kwokctl
// binds 0.0.0.0 unless told otherwise, and the cluster's etcd takes plain HTTP without
// credentials. Each component must listen on something, so that the check cannot pass on a
// cluster that did not start.
func TestEveryComponentListensOnLoopbackOnly(t *testing.T) {
	// A cluster of this name that an older script left running would be reused: start afresh.
	if _, err := localCluster("down"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := localCluster("down"); err != nil {
			t.Error(err)
		}
	})
	kubeconfig, err := localCluster("up")
	if err != nil {
		t.Fatal(err)
	}

	pidDir := filepath.Join(filepath.Dir(kubeconfig), "pids")
	pids, err := readPIDs(pidDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range components {
		if _, ok := pids[c]; !ok {
			t.Errorf("no pid file for %s in %s (found %v): kwokctl's layout changed, or the component did not start", c, pidDir, pids)
		}
	}
	if len(pids) == 0 {
		t.Fatalf("no processes: %s holds no pid files", pidDir)
	}

	names := make([]string, 0, len(pids))
	for name := range pids {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		pid := pids[name]
		addrs, err := listeners.Of(pid)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		t.Logf("%s (pid %d) listens on %v", name, pid, addrs)
		if err := listeners.Check(name, pid, addrs); err != nil {
			t.Error(err)
		}
	}
}

// localCluster runs hack/local-cluster.sh with arg for this test's cluster of one node, and
// returns what it printed on stdout, trimmed (up prints the kubeconfig path).
func localCluster(arg string) (string, error) {
	cmd := exec.Command(filepath.Join("..", "..", "hack", "local-cluster.sh"), arg)
	cmd.Env = append(os.Environ(), "CLUSTER_NAME="+clusterName, "NODES=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("hack/local-cluster.sh %s: %w\n%s", arg, err, stderr.String())
	}
	return strings.TrimSpace(stdout.String()), nil
}

// readPIDs reads the pid files in dir: component name to pid.
func readPIDs(dir string) (map[string]int, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.pid"))
	if err != nil {
		return nil, err
	}
	pids := map[string]int{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		pids[strings.TrimSuffix(filepath.Base(f), ".pid")] = pid
	}
	return pids, nil
}
