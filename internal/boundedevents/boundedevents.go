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

// Package boundedevents records Kubernetes Events (events.k8s.io/v1) with bounded memory and a
// bounded write rate.
//
// client-go's event broadcaster, which controller-runtime's recorders use, keeps every distinct
// event in memory for six to twelve minutes to fold repeats into a series, and writes each one
// from a goroutine of its own. lockwarden's events name a fencing token or a holder, so they
// rarely repeat: at 10,000 pods that cache held about a fifth of the manager's heap (docs/scale.md).
// Here an event waits in a queue of fixed length and is written at most QPS times a second;
// when the queue is full it is dropped and counted (lockwarden_events_dropped_total). An event
// that repeats one of the last Recent distinct events within SeriesWindow is written as a series,
// as client-go does (the first event's series count goes up, by a patch). Events are for people
// reading `kubectl describe`; the metrics and the objects' status are the record, so losing some
// under a flood costs nothing that matters.
package boundedevents

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/tools/reference"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// Options bound the recorder.
type Options struct {
	// QPS is how many events a second are written at most, and Burst how many at once.
	QPS   float64
	Burst int
	// Queue is how many events wait to be written at most; more are dropped.
	Queue int
	// WriteTimeout bounds one write.
	WriteTimeout time.Duration
	// Recent is how many distinct events are remembered to fold repeats into a series, and
	// SeriesWindow how long after its last occurrence a repeat still joins one.
	Recent       int
	SeriesWindow time.Duration
}

// DefaultOptions are ten events a second with bursts of a hundred, a thousand waiting. A thousand
// events take about 2 MB.
var DefaultOptions = Options{QPS: 10, Burst: 100, Queue: 1000, WriteTimeout: 10 * time.Second,
	Recent: 1024, SeriesWindow: 6 * time.Minute}

// noteMax is the API's limit on an event's note.
const noteMax = 1024

// Recorder implements client-go's events.EventRecorder. Start it with the manager (it is a
// manager.Runnable): until then events wait in the queue.
type Recorder struct {
	client     client.Client
	scheme     *runtime.Scheme
	controller string
	instance   string
	clock      clock.Clock
	opts       Options
	queue      chan write
	dropped    *prometheus.CounterVec

	mu     sync.Mutex
	recent *recentEvents
}

// write is one request to the API server: create event, or, when series is set, patch the
// existing event's series.
type write struct {
	event  *eventsv1.Event
	series *eventsv1.EventSeries
}

// New returns a recorder that writes with c as reportingController controller from instance
// (the process's identity, such as the pod name), and counts the events it drops in dropped (by
// reason: queue-full, write-failed), which may be nil.
func New(c client.Client, scheme *runtime.Scheme, controller, instance string, o Options, dropped *prometheus.CounterVec) *Recorder {
	if dropped == nil {
		dropped = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "unregistered_events_dropped_total"}, []string{"reason"})
	}
	return &Recorder{
		client: c, scheme: scheme, controller: controller, instance: instance, clock: clock.RealClock{}, opts: o,
		queue: make(chan write, o.Queue), dropped: dropped, recent: newRecentEvents(o.Recent),
	}
}

// Eventf queues an event about regarding (and related, which may be nil); it never blocks.
func (r *Recorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	event, err := r.makeEvent(regarding, related, eventtype, reason, action, fmt.Sprintf(note, args...))
	if err != nil {
		logf.Log.WithName("events").Error(err, "Not recording an event", "reason", reason)
		return
	}
	r.mu.Lock()
	w := r.recent.observe(event, r.opts.SeriesWindow)
	r.mu.Unlock()
	select {
	case r.queue <- w:
	default:
		r.dropped.WithLabelValues("queue-full").Inc()
	}
}

// makeEvent builds the Event as client-go's recorder does, without a series.
func (r *Recorder) makeEvent(regarding, related runtime.Object, eventtype, reason, action, note string) (*eventsv1.Event, error) {
	if eventtype != corev1.EventTypeNormal && eventtype != corev1.EventTypeWarning {
		return nil, fmt.Errorf("event type %q is neither Normal nor Warning", eventtype)
	}
	refRegarding, err := reference.GetReference(r.scheme, regarding)
	if err != nil {
		return nil, fmt.Errorf("referring to the object: %w", err)
	}
	var refRelated *corev1.ObjectReference
	if related != nil {
		if refRelated, err = reference.GetReference(r.scheme, related); err != nil {
			refRelated = nil // the event still says what it is about
		}
	}
	now := r.clock.Now()
	namespace := refRegarding.Namespace
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	if len(note) > noteMax {
		note = note[:noteMax-3] + "..."
	}
	return &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: eventName(refRegarding.Name, now), Namespace: namespace},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: r.controller,
		ReportingInstance:   r.instance,
		Action:              action,
		Reason:              reason,
		Regarding:           *refRegarding,
		Related:             refRelated,
		Note:                note,
		Type:                eventtype,
	}, nil
}

// eventName is "<object>.<time in hex>", as client-go names events, or a random name when that
// is not a valid object name (a long object name).
func eventName(object string, now time.Time) string {
	name := fmt.Sprintf("%s.%x", object, now.UnixNano())
	if errs := apimachineryvalidation.NameIsDNSSubdomain(name, false); len(errs) > 0 {
		return "lockwarden-event-" + rand.String(16)
	}
	return name
}

// Start writes queued events until ctx ends, at most QPS a second.
func (r *Recorder) Start(ctx context.Context) error {
	limiter := rate.NewLimiter(rate.Limit(r.opts.QPS), r.opts.Burst)
	log := logf.FromContext(ctx).WithName("events")
	for {
		var w write
		select {
		case <-ctx.Done():
			return nil
		case w = <-r.queue:
		}
		if err := limiter.Wait(ctx); err != nil {
			return nil
		}
		wctx, cancel := context.WithTimeout(ctx, r.opts.WriteTimeout)
		err := r.send(wctx, w)
		cancel()
		if err != nil {
			r.dropped.WithLabelValues("write-failed").Inc()
			log.V(1).Info("Could not write an event", "reason", w.event.Reason, "regarding", w.event.Regarding.Name, "error", err.Error())
		}
	}
}

// send creates the event or patches its series.
func (r *Recorder) send(ctx context.Context, w write) error {
	if w.series == nil {
		return r.client.Create(ctx, w.event)
	}
	patch, err := json.Marshal(map[string]any{"series": w.series})
	if err != nil {
		return err
	}
	target := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: w.event.Namespace, Name: w.event.Name}}
	return r.client.Patch(ctx, target, client.RawPatch(types.MergePatchType, patch))
}

// NeedLeaderElection is false: every replica writes the events it records (only the leader
// records many).
func (r *Recorder) NeedLeaderElection() bool { return false }
