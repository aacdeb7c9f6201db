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
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// goFlagStyle rewrites the long flags in args that are written with one dash (-lock db,
// -timeout=5m) to the two dashes that pflag wants. lockctl's flags were Go flags, which take
// either, and command lines written for them (init containers) must keep working. It rewrites
// the flags of the command named first only, up to "--" and, for a command whose arguments are a
// command line (run), up to its first argument.
func goFlagStyle(root *cobra.Command, args []string) []string {
	if len(args) == 0 {
		return args
	}
	cmd, _, err := root.Find(args[:1])
	if err != nil || cmd == root {
		return args
	}
	cmd.InitDefaultHelpFlag() // -help, too
	flags := cmd.Flags()
	out := slices.Clone(args)
	for i := 1; i < len(out); i++ {
		arg := out[i]
		switch {
		case arg == "--":
			return out
		case len(arg) < 2 || arg[0] != '-':
			if cmd.Annotations[argsAreCommandAnnotation] != "" {
				return out
			}
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		var f *pflag.Flag
		switch {
		case strings.HasPrefix(arg, "--"):
			f = flags.Lookup(name)
		case len(name) == 1:
			f = flags.ShorthandLookup(name)
		default:
			if f = flags.Lookup(name); f != nil {
				out[i] = "-" + arg
			}
		}
		if f != nil && !hasValue && f.NoOptDefVal == "" {
			i++ // the flag's value
		}
	}
	return out
}
