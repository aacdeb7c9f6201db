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
	"time"

	"github.com/lockwarden/lockwarden/pkg/lockclient"
)

// acquire takes a lock for lockctl's own pod and waits for it: the init-container command.
func (a *app) acquire(args []string) error {
	fs := a.newFlagSet("acquire", "acquire --lock NAME [--timeout D] [--token-file PATH]")
	lock := fs.String("lock", "", "Name of the DistributedLock (required)")
	timeout := fs.Duration("timeout", 0, "Give up after this long, exit code 3 (0 waits forever)")
	tokenFile := fs.String("token-file", "", "Write the fencing token to this file")
	var k kubeFlags
	k.register(fs)
	rest, err := a.parseArgs(fs, args, false)
	switch {
	case err != nil:
		return err
	case len(rest) > 0:
		return usagef("acquire takes no arguments, got %q", rest)
	case *lock == "":
		return usagef("--lock is required")
	case *timeout < 0:
		return usagef("--timeout must not be negative")
	}
	pod := a.podFromEnv()
	if pod == nil {
		return usagef("POD_NAME is not set: acquire takes the lock for its own pod, named by the downward API (POD_NAME, POD_NAMESPACE, POD_UID); use lockctl run outside a pod")
	}
	if err := a.checkPodNamespace(&k); err != nil {
		return err
	}
	c, ns, err := a.connect(&k)
	if err != nil {
		return err
	}
	ctx, cancel := signalContext()
	defer cancel()
	res, err := c.Acquire(ctx, lockclient.Request{Namespace: ns, Lock: *lock, Pod: pod, Timeout: *timeout})
	if err != nil {
		return err
	}
	return a.acquired(res, *tokenFile)
}

// wait waits until an existing claim holds its lock.
func (a *app) wait(args []string) error {
	fs := a.newFlagSet("wait", "wait CLAIM [--timeout D] [--token-file PATH]")
	timeout := fs.Duration("timeout", 0, "Give up after this long, exit code 3 (0 waits forever)")
	tokenFile := fs.String("token-file", "", "Write the fencing token to this file")
	var k kubeFlags
	k.register(fs)
	rest, err := a.parseArgs(fs, args, false)
	switch {
	case err != nil:
		return err
	case len(rest) != 1:
		return usagef("wait takes one LockClaim name")
	case *timeout < 0:
		return usagef("--timeout must not be negative")
	}
	c, ns, err := a.connect(&k)
	if err != nil {
		return err
	}
	ctx, cancel := signalContext()
	defer cancel()
	ctx, cancelTimeout := withTimeout(ctx, *timeout)
	defer cancelTimeout()
	res, err := c.Wait(ctx, ns, rest[0])
	if err != nil {
		return err
	}
	return a.acquired(res, *tokenFile)
}

// release deletes a claim (by name, or with --lock this pod's claim for the lock) and waits until
// the controller has released the lock.
func (a *app) release(args []string) error {
	fs := a.newFlagSet("release", "release CLAIM | --lock NAME [--timeout D]")
	lock := fs.String("lock", "", "Release this pod's claim for this lock (POD_NAME, POD_UID) instead of a named claim")
	timeout := fs.Duration("timeout", 30*time.Second, "How long to wait for the controller to release the lock, exit code 3 (0 waits forever)")
	var k kubeFlags
	k.register(fs)
	rest, err := a.parseArgs(fs, args, false)
	switch {
	case err != nil:
		return err
	case *lock == "" && len(rest) != 1, *lock != "" && len(rest) != 0:
		return usagef("release takes either one LockClaim name or --lock")
	case *timeout < 0:
		return usagef("--timeout must not be negative")
	}
	pod := a.podFromEnv()
	if *lock != "" {
		if pod == nil {
			return usagef("--lock releases this pod's claim, but POD_NAME is not set; give the claim's name instead")
		}
		if err := a.checkPodNamespace(&k); err != nil {
			return err
		}
	}
	c, ns, err := a.connect(&k)
	if err != nil {
		return err
	}
	ctx, cancel := signalContext()
	defer cancel()
	ctx, cancelTimeout := withTimeout(ctx, *timeout)
	defer cancelTimeout()
	name := ""
	if len(rest) == 1 {
		name = rest[0]
	} else if name, err = c.PodClaim(ctx, ns, *pod, *lock); err != nil {
		return err
	}
	if err := c.Release(ctx, ns, name); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "released claim %q in namespace %q\n", name, ns)
	return nil
}

// acquired reports a granted claim: the token to tokenFile (when set) and one line to stdout.
func (a *app) acquired(res *lockclient.Result, tokenFile string) error {
	if tokenFile != "" {
		if err := writeTokenFile(tokenFile, res.FencingToken); err != nil {
			return err
		}
	}
	fmt.Fprintln(a.stdout, acquiredLine(res))
	return nil
}
