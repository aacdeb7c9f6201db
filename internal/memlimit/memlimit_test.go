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

package memlimit

import (
	"errors"
	"io/fs"
	"testing"
)

func TestParseLimit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"268435456\n", 268435456, true},
		{"max\n", 0, false},
		{"9223372036854771712\n", 0, false}, // cgroup v1's "no limit"
		{"", 0, false},
		{"-1", 0, false},
		{"lots", 0, false},
	} {
		got, ok := parseLimit(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseLimit(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestContainerLimit(t *testing.T) {
	files := func(m map[string]string) func(string) ([]byte, error) {
		return func(name string) ([]byte, error) {
			if v, ok := m[name]; ok {
				return []byte(v), nil
			}
			return nil, fs.ErrNotExist
		}
	}
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  int64
		ok    bool
	}{
		{"cgroup v2", map[string]string{cgroupFiles[0]: "134217728\n"}, 134217728, true},
		{"cgroup v2 without a limit", map[string]string{cgroupFiles[0]: "max\n", cgroupFiles[1]: "1000\n"}, 0, false},
		{"cgroup v1", map[string]string{cgroupFiles[1]: "67108864\n"}, 67108864, true},
		{"no cgroup files", nil, 0, false},
	} {
		got, ok := containerLimit(files(tc.files))
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: %d, %v; want %d, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
	if _, ok := containerLimit(func(string) ([]byte, error) { return nil, errors.New("denied") }); ok {
		t.Error("unreadable files must mean no limit")
	}
}

func TestSoftLimit(t *testing.T) {
	for _, tc := range []struct {
		limit int64
		ratio float64
		want  int64
		ok    bool
	}{
		{256 << 20, 0.9, 241591910, true},
		{256 << 20, 1, 256 << 20, true},
		{256 << 20, 0, 0, false},
		{256 << 20, 1.5, 0, false},
		{0, 0.9, 0, false},
	} {
		got, ok := softLimit(tc.limit, tc.ratio)
		if got != tc.want || ok != tc.ok {
			t.Errorf("softLimit(%d, %v) = %d, %v; want %d, %v", tc.limit, tc.ratio, got, ok, tc.want, tc.ok)
		}
	}
}
