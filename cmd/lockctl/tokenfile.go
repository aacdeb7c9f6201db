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
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/lockwarden/lockwarden/pkg/lockclient"
)

// writeTokenFile writes content (tokenFileContent) to path atomically (a temporary file
// in the same directory, renamed), so that a reader never sees a partial token. The file is
// world-readable: a fencing token is not a secret, and the app container may run as another user.
func writeTokenFile(path string, content string) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".lockctl-token-*")
	if err != nil {
		return fmt.Errorf("writing token file: %w; mount a writable volume (an emptyDir) at %s", err, dir)
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // no-op after the rename
	if _, err := tmp.WriteString(content); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("writing token file %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("writing token file %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing token file %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing token file %s: %w", path, err)
	}
	return nil
}

// tokenFileContent is what the token file of a grant holds: the token in decimal, without a
// newline; for a claim of several locks, one line per lock, "LOCK=TOKEN", in name order.
func tokenFileContent(r *lockclient.Result) string {
	if len(r.Locks) == 0 {
		return strconv.FormatInt(r.FencingToken, 10)
	}
	var b strings.Builder
	for _, l := range r.Locks {
		fmt.Fprintf(&b, "%s=%d\n", l.Lock, l.FencingToken)
	}
	return b.String()
}

// tokenEnv is the variable that gives run's command the token: LOCKWARDEN_FENCING_TOKEN, or for
// a claim of several locks LOCKWARDEN_FENCING_TOKENS, "LOCK=TOKEN" pairs joined by commas in name
// order.
func tokenEnv(r *lockclient.Result) string {
	if len(r.Locks) == 0 {
		return "LOCKWARDEN_FENCING_TOKEN=" + strconv.FormatInt(r.FencingToken, 10)
	}
	pairs := make([]string, len(r.Locks))
	for i, l := range r.Locks {
		pairs[i] = fmt.Sprintf("%s=%d", l.Lock, l.FencingToken)
	}
	return "LOCKWARDEN_FENCING_TOKENS=" + strings.Join(pairs, ",")
}
