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

package lockengine

// serving says how many locks have a pass running or waiting: passlocks_test.go checks that the
// map drops a lock once its last pass ends.
func (p *passLocks) serving() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.locks)
}
