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

import (
	"context"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	locksv1alpha1 "github.com/lockwarden/lockwarden/api/v1alpha1"
)

// How a lock's passes are ordered in the work queue (controller-runtime's priority queue: higher
// priority first, then first come, first served).
//
// The queue gives the objects of the informers' initial lists priority -100, so that a manager
// that starts, or a standby that becomes leader, serves news before it revisits what it already
// knows; and a pass that asks to run again keeps, unless it says otherwise, the priority it ran
// with. Both are wrong for a lock with a hold. After a failover the new leader must resume every
// hold and move its claims' status.expireTime forward before it passes; at -100 those passes
// waited behind every pod and claim event of the cluster, and so did every later refresh of the
// same lock, until some event about it raised it to 0 (the scale benchmark measured 28 s until
// the last hold was resumed, and Held claims up to 92 s past their expireTime, at 1,000 locks
// under churn). So a lock that appears with a recorded hold is queued at resumePriority, once,
// and every pass asks for its next one at timerPriority.
//
// Refreshes are not in this queue at all: they have a lane of their own (refresh.go). In
// this queue a raised refresh timer would raise every event of every held lock as well (the queue
// merges an event into a pass already waiting for its timer and keeps the higher of the two
// priorities), and locks still waiting for their first grant would starve behind them (measured:
// 353 of 1,000 locks went 30 s without a grant); at the events' priority, refreshes waited behind
// a minute of handoffs under churn.

const (
	// resumePriority is the priority of the first pass of a lock found with a recorded hold.
	resumePriority = 10
	// timerPriority is the priority of the next pass a pass asks for: that of events.
	timerPriority = 0
)

// holdsFirst is a second handler on the DistributedLock informer: it queues at resumePriority
// the locks that appear with a recorded hold (the initial list, or a lock created by a restore
// with its status). The builder's own handler queues them too; the queue keeps the higher
// priority of the two.
func holdsFirst() handler.TypedEventHandler[*locksv1alpha1.DistributedLock, reconcile.Request] {
	return handler.TypedFuncs[*locksv1alpha1.DistributedLock, reconcile.Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[*locksv1alpha1.DistributedLock], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			p := appearPriority(e.Object)
			if p == nil {
				return
			}
			req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(e.Object)}
			if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
				pq.AddWithOpts(priorityqueue.AddOpts{Priority: p}, req)
				return
			}
			q.Add(req)
		},
	}
}

// appearPriority is the priority of the first pass of a lock the informer shows for the first
// time: resumePriority when it records a hold, none (the builder's default) when not.
func appearPriority(lock *locksv1alpha1.DistributedLock) *int {
	if lock == nil || len(lock.Status.CurrentHolders()) == 0 {
		return nil
	}
	return ptr.To(resumePriority)
}
