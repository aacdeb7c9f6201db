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
	"container/list"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// sameEvent is what makes two events one series: the object, and everything the event says.
type sameEvent struct {
	regardingUID, regardingKind, namespace, name string
	eventType, reason, action, note              string
}

func keyOf(e *eventsv1.Event) sameEvent {
	return sameEvent{string(e.Regarding.UID), e.Regarding.Kind, e.Regarding.Namespace, e.Regarding.Name,
		e.Type, e.Reason, e.Action, e.Note}
}

// seenEvent is a remembered event: the Event object written for it and its series so far.
type seenEvent struct {
	key       sameEvent
	namespace string
	name      string
	count     int32
	last      time.Time
}

// recentEvents remembers the last max distinct events, least recently seen first out, so that
// memory stays bounded however many distinct events there are.
type recentEvents struct {
	max   int
	order *list.List // of *seenEvent, most recent at the front
	byKey map[sameEvent]*list.Element
}

func newRecentEvents(limit int) *recentEvents {
	return &recentEvents{max: limit, order: list.New(), byKey: map[sameEvent]*list.Element{}}
}

// observe decides how to write event: as itself, or, when it repeats a remembered event last
// seen within window, as that event's series with one more occurrence.
func (r *recentEvents) observe(event *eventsv1.Event, window time.Duration) write {
	k := keyOf(event)
	now := event.EventTime.Time
	if el, ok := r.byKey[k]; ok {
		seen := el.Value.(*seenEvent)
		if now.Sub(seen.last) <= window {
			seen.count++
			seen.last = now
			r.order.MoveToFront(el)
			repeat := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: seen.namespace, Name: seen.name},
				Regarding: event.Regarding, Reason: event.Reason}
			return write{event: repeat, series: &eventsv1.EventSeries{Count: seen.count, LastObservedTime: metav1.NewMicroTime(now)}}
		}
		r.order.Remove(el)
		delete(r.byKey, k)
	}
	if r.max <= 0 {
		return write{event: event}
	}
	r.byKey[k] = r.order.PushFront(&seenEvent{key: k, namespace: event.Namespace, name: event.Name, count: 1, last: now})
	for r.order.Len() > r.max {
		oldest := r.order.Back()
		r.order.Remove(oldest)
		delete(r.byKey, oldest.Value.(*seenEvent).key)
	}
	return write{event: event}
}
