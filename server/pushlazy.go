package server

import (
	"context"
	"errors"
	"sync"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/events"
	"github.com/murmur-run/murmur/member/push"
)

// lazyPush is the push notifier of a member whose SQLite task store this start created. Such a file
// holds no config and no outbox row yet, so there is nothing to deliver until a caller asks for push:
// the notifier (its connections to the file, its tables, its goroutine) opens at the first call of the
// door's, and task changes before it reach nobody, as they would reach no config of an open one. A
// formation of a thousand members starts without a thousand notifiers nobody has asked for.
type lazyPush struct {
	open  func() (*push.Notifier, error)
	allow push.Allowlist

	mu     sync.Mutex
	n      *push.Notifier // the notifier once open; a failed open is tried again at the next call
	closed bool           // Close was called: the notifier opens no more
}

var _ pushNotifier = (*lazyPush)(nil)

// notifier opens the notifier the first time, and returns it.
func (l *lazyPush) notifier() (*push.Notifier, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, errPushClosed
	}
	if l.n == nil {
		n, err := l.open()
		if err != nil {
			return nil, err
		}
		l.n = n
	}
	return l.n, nil
}

// opened is the notifier when it is open; nil before.
func (l *lazyPush) opened() *push.Notifier {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// Changed passes a task's change to the notifier once it is open (events.Hub's observer).
func (l *lazyPush) Changed(c events.Change) {
	if n := l.opened(); n != nil {
		n.Changed(c)
	}
}

// Watches reports whether a config watches the task: none can before the notifier opens.
func (l *lazyPush) Watches(id a2a.TaskID) bool {
	n := l.opened()
	return n != nil && n.Watches(id)
}

func (l *lazyPush) Create(ctx context.Context, caller string, c a2a.TaskPushNotificationConfig) (a2a.TaskPushNotificationConfig, error) {
	n, err := l.notifier()
	if err != nil {
		return a2a.TaskPushNotificationConfig{}, err
	}
	return n.Create(ctx, caller, c)
}

func (l *lazyPush) Get(ctx context.Context, task a2a.TaskID, id string) (a2a.TaskPushNotificationConfig, error) {
	n, err := l.notifier()
	if err != nil {
		return a2a.TaskPushNotificationConfig{}, err
	}
	return n.Get(ctx, task, id)
}

func (l *lazyPush) List(ctx context.Context, task a2a.TaskID) ([]a2a.TaskPushNotificationConfig, error) {
	n, err := l.notifier()
	if err != nil {
		return nil, err
	}
	return n.List(ctx, task)
}

func (l *lazyPush) Delete(ctx context.Context, task a2a.TaskID, id string) error {
	n, err := l.notifier()
	if err != nil {
		return err
	}
	return n.Delete(ctx, task, id)
}

// CheckURL checks url against push.allow, as the notifier would, without opening it.
func (l *lazyPush) CheckURL(url string) error {
	_, err := l.allow.CheckURL(url)
	return err
}

func (l *lazyPush) CheckRoom(ctx context.Context, caller string) error {
	n, err := l.notifier()
	if err != nil {
		return err
	}
	return n.CheckRoom(ctx, caller)
}

// Close closes the notifier if it opened.
func (l *lazyPush) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	if l.n == nil {
		return nil
	}
	return l.n.Close()
}

// errPushClosed is the error of a push call after the member's shutdown closed its notifier.
var errPushClosed = errors.New("push: the notifier is closed")
