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

// Command duration prints a Go duration (8h, 90m, 1h30m) as whole seconds, for scripts such as
// hack/test-reliability.sh soak (SOAK_FOR).
package main

import (
	"fmt"
	"os"
	"time"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: duration D (a Go duration: 8h, 90m, 1h30m)")
		os.Exit(2)
	}
	d, err := time.ParseDuration(os.Args[1])
	if err != nil || d <= 0 {
		fmt.Fprintf(os.Stderr, "duration: %q is not a positive duration such as 8h or 90m\n", os.Args[1])
		os.Exit(2)
	}
	fmt.Println(int64(d / time.Second))
}
