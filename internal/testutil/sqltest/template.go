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

package sqltest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// A data directory made by initdb or mariadb-install-db is the same for every server of a test
// process but takes seconds to make (mariadb-install-db ten on a loaded 2-core machine, mostly
// waiting on its bootstrap), and the SQL tests start dozens of servers. So each kind is made once
// per process, into a template, and each server starts from a copy of it (cp -a: a fraction of a
// second). A server still never shares its data with another: what one test writes, kills or
// corrupts, no other test sees.
//
// The template lives outside any test's directory, for the whole process; its name carries the
// process ID, and a process making a template removes those of processes that no longer run.

// dataTemplate is one kind's template: dir/data, and the superuser password it was made with.
type dataTemplate struct {
	once          sync.Once
	dir           string
	adminPassword string
	err           error
}

var (
	postgresTemplate dataTemplate
	mariadbTemplate  dataTemplate
)

const templatePrefix = "lockwarden-sqltest-template-"

// get makes the template on first use with build, in a fresh directory owned by cred's user (nil:
// the current one); build writes dir/data and dir/init.log and returns the superuser password.
func (tp *dataTemplate) get(kind string, cred *syscall.Credential, build func(dir string) (string, error)) (*dataTemplate, error) {
	tp.once.Do(func() {
		removeStaleTemplates()
		dir, err := os.MkdirTemp("", templatePrefix+strconv.Itoa(os.Getpid())+"-"+kind+"-")
		if err != nil {
			tp.err = err
			return
		}
		if cred != nil {
			if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
				tp.err = err
				return
			}
		}
		tp.dir = dir
		tp.adminPassword, tp.err = build(dir)
	})
	return tp, tp.err
}

// copyTo copies the template's data directory and init log into dir, keeping owners and modes
// (PostgreSQL refuses a data directory that is not its user's, mode 0700).
func (tp *dataTemplate) copyTo(dir string) error {
	if out, err := exec.Command("cp", "-a", filepath.Join(tp.dir, "data"), filepath.Join(tp.dir, "init.log"), dir).CombinedOutput(); err != nil {
		return fmt.Errorf("copying the template data directory %s: %v: %s", tp.dir, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// removeStaleTemplates removes the templates of test processes that have exited.
func removeStaleTemplates() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), templatePrefix+"*"))
	for _, d := range dirs {
		pid, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(filepath.Base(d), templatePrefix), "-", 2)[0])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(d)
		}
	}
}
