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
)

// writeTokenFile writes token, in decimal without a newline, to path atomically (a temporary file
// in the same directory, renamed), so that a reader never sees a partial token. The file is
// world-readable: a fencing token is not a secret, and the app container may run as another user.
func writeTokenFile(path string, token int64) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".lockctl-token-*")
	if err != nil {
		return fmt.Errorf("writing token file: %w; mount a writable volume (an emptyDir) at %s", err, dir)
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // no-op after the rename
	if _, err := tmp.WriteString(strconv.FormatInt(token, 10)); err != nil {
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
