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
	"encoding/json"
	"fmt"

	"sigs.k8s.io/yaml"

	"github.com/lockwarden/lockwarden/internal/version"
)

// version prints which build of lockctl this is. It needs no cluster.
func (a *app) version(args []string) error {
	fs := a.newFlagSet("version", "version [-o text|json|yaml]")
	var output string
	fs.StringVar(&output, "output", "text", "Output format: text, json or yaml")
	fs.StringVar(&output, "o", "text", "Shorthand for --output")
	rest, err := a.parseArgs(fs, args, false)
	switch {
	case err != nil:
		return err
	case len(rest) > 0:
		return usagef("version takes no arguments, got %q", rest)
	case output != "text" && output != "json" && output != "yaml":
		return usagef("--output must be text, json or yaml, not %q", output)
	}
	info := version.Get()
	switch output {
	case "json":
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(info)
	case "yaml":
		b, err := yaml.Marshal(info)
		if err != nil {
			return err
		}
		_, err = a.stdout.Write(b)
		return err
	}
	fmt.Fprintf(a.stdout, "Version:     %s\n", info.Version)
	fmt.Fprintf(a.stdout, "Commit:      %s\n", info.Commit)
	fmt.Fprintf(a.stdout, "Built:       %s\n", info.BuildDate)
	fmt.Fprintf(a.stdout, "Go:          %s %s\n", info.GoVersion, info.Platform)
	return nil
}
