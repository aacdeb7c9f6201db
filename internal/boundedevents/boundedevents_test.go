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

package boundedevents

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func pod(name string) *corev1.Pod {
	return &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, UID: types.UID("uid-" + name)}}
}

func newTestRecorder(t *testing.T, o Options) (*Recorder, client.WithWatch, *clocktesting.FakeClock, *prometheus.CounterVec) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	dropped := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dropped"}, []string{"reason"})
	r := New(c, scheme, "lockwarden", "manager-0", o, dropped)
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	r.clock = clk
	return r, c, clk, dropped
}

func TestMakeEvent(t *testing.T) {
	g := NewWithT(t)
	r, _, clk, _ := newTestRecorder(t, DefaultOptions)
	e, err := r.makeEvent(pod("web-0"), &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "cfg"}}, corev1.EventTypeNormal, "LockAcquired", "WaitForLock", "held")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(e.Namespace).To(Equal("apps"))
	g.Expect(e.Name).To(HavePrefix("web-0."))
	g.Expect(e.EventTime.Time).To(BeTemporally("==", clk.Now()))
	g.Expect(e.ReportingController).To(Equal("lockwarden"))
	g.Expect(e.ReportingInstance).To(Equal("manager-0"))
	g.Expect(e.Regarding.Kind).To(Equal("Pod"))
	g.Expect(e.Related).NotTo(BeNil())
	g.Expect(e.Related.Name).To(Equal("cfg"))
	g.Expect([]string{e.Type, e.Reason, e.Action, e.Note}).To(Equal([]string{"Normal", "LockAcquired", "WaitForLock", "held"}))

	_, err = r.makeEvent(pod("web-0"), nil, "Loud", "R", "A", "n")
	g.Expect(err).To(MatchError(ContainSubstring(`event type "Loud"`)))

	long, err := r.makeEvent(pod(strings.Repeat("p", 253)), nil, corev1.EventTypeWarning, "R", "A", strings.Repeat("n", 5000))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(long.Name).To(HavePrefix("lockwarden-event-"), "an object name too long for <name>.<time>")
	g.Expect(long.Note).To(HaveLen(noteMax))
	g.Expect(long.Note).To(HaveSuffix("..."))

	cluster, err := r.makeEvent(&corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: "apps"}}, nil, corev1.EventTypeNormal, "R", "A", "n")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cluster.Namespace).To(Equal(metav1.NamespaceDefault), "events on cluster-scoped objects")
}

func TestRecentEvents(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	event := func(name, note string, at time.Duration) *eventsv1.Event {
		return &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name + "-event"},
			EventTime: metav1.NewMicroTime(start.Add(at)), Regarding: corev1.ObjectReference{Kind: "Pod", Name: name, UID: types.UID("u-" + name)},
			Type: corev1.EventTypeWarning, Reason: "ClaimFailed", Note: note}
	}
	type want struct {
		name  string // the Event written or patched
		count int32  // 0: a new event
	}
	for _, tc := range []struct {
		name   string
		max    int
		events []*eventsv1.Event
		want   []want
	}{
		{"distinct events are each written", 4,
			[]*eventsv1.Event{event("a", "x", 0), event("b", "x", 0), event("a", "y", 0)},
			[]want{{"a-event", 0}, {"b-event", 0}, {"a-event", 0}}},
		{"repeats within the window become the first one's series", 4,
			[]*eventsv1.Event{event("a", "x", 0), event("a", "x", time.Minute), event("a", "x", 6*time.Minute)},
			[]want{{"a-event", 0}, {"a-event", 2}, {"a-event", 3}}},
		{"a repeat after the window starts again", 4,
			[]*eventsv1.Event{event("a", "x", 0), event("a", "x", 7*time.Minute), event("a", "x", 8*time.Minute)},
			[]want{{"a-event", 0}, {"a-event", 0}, {"a-event", 2}}},
		{"the least recently seen is forgotten first", 2,
			[]*eventsv1.Event{event("a", "x", 0), event("b", "x", 0), event("a", "x", 0), event("c", "x", 0),
				event("a", "x", 0), event("b", "x", 0)},
			[]want{{"a-event", 0}, {"b-event", 0}, {"a-event", 2}, {"c-event", 0}, {"a-event", 3}, {"b-event", 0}}},
		{"nothing remembered", 0,
			[]*eventsv1.Event{event("a", "x", 0), event("a", "x", 0)},
			[]want{{"a-event", 0}, {"a-event", 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			r := newRecentEvents(tc.max)
			var got []want
			for _, e := range tc.events {
				w := r.observe(e, 6*time.Minute)
				if w.series == nil {
					got = append(got, want{w.event.Name, 0})
				} else {
					got = append(got, want{w.event.Name, w.series.Count})
				}
			}
			g.Expect(got).To(Equal(tc.want))
			g.Expect(r.order.Len()).To(BeNumerically("<=", tc.max))
			g.Expect(r.byKey).To(HaveLen(r.order.Len()))
		})
	}
}

func TestRecorderWritesAndDrops(t *testing.T) {
	g := NewWithT(t)
	o := DefaultOptions
	o.Queue = 3
	r, c, clk, dropped := newTestRecorder(t, o)

	// Before Start, events wait in the queue; past its length they are dropped and counted.
	r.Eventf(pod("a"), nil, corev1.EventTypeWarning, "ClaimFailed", "CreateClaim", "refused: %s", "frozen")
	clk.Step(time.Second)
	r.Eventf(pod("a"), nil, corev1.EventTypeWarning, "ClaimFailed", "CreateClaim", "refused: %s", "frozen")
	r.Eventf(pod("b"), nil, corev1.EventTypeNormal, "LockAcquired", "WaitForLock", "held")
	r.Eventf(pod("c"), nil, corev1.EventTypeNormal, "LockAcquired", "WaitForLock", "held")
	g.Expect(testutil.ToFloat64(dropped.WithLabelValues("queue-full"))).To(Equal(1.0))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Start(ctx) }()
	g.Eventually(func(g Gomega) {
		list := &eventsv1.EventList{}
		g.Expect(c.List(ctx, list)).To(Succeed())
		byRegarding := map[string]*eventsv1.Event{}
		for i := range list.Items {
			byRegarding[list.Items[i].Regarding.Name] = &list.Items[i]
		}
		g.Expect(byRegarding).To(HaveLen(2), "a and b; c was dropped")
		g.Expect(byRegarding["a"].Series).NotTo(BeNil(), "the repeat is a series")
		g.Expect(byRegarding["a"].Series.Count).To(BeEquivalentTo(2))
		g.Expect(byRegarding["b"].Series).To(BeNil())
	}).Should(Succeed())
	cancel()
	g.Eventually(done).Should(Receive(BeNil()))
	g.Expect(testutil.ToFloat64(dropped.WithLabelValues("write-failed"))).To(Equal(0.0))
}
