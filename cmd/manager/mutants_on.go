//go:build mutants

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

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/lockwarden/lockwarden/internal/mutant"
)

// checkMutants refuses a LOCKWARDEN_MUTANT that names no bug (a typo would run a correct manager
// that every checker passes) and says loudly which bugs this run carries.
func checkMutants() error {
	if unknown := mutant.Unknown(); len(unknown) > 0 {
		return fmt.Errorf("%s names unknown mutants %v; known: %v", mutant.EnvVar, unknown, mutant.All)
	}
	ctrl.Log.WithName("mutant").Info("This manager carries deliberate bugs for mutation testing", "mutants", os.Getenv(mutant.EnvVar))
	return nil
}
