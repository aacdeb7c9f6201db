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

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/lockwarden/lockwarden/internal/version"
)

// versionCommand prints which build of lockctl this is. It needs no cluster.
func (a *app) versionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version [-o text|json|yaml]",
		Short: "Print lockctl's version, git commit and Go version",
		Args:  cobra.ArbitraryArgs,
		RunE: func(_ *cobra.Command, args []string) error {
			return a.version(output, args)
		},
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "Output format: text, json or yaml")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]cobra.Completion{"text", "json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// version prints the build in output's format.
func (a *app) version(output string, rest []string) error {
	switch {
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
