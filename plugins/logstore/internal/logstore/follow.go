package logstore

import "regexp"

// followBuffer is how many lines a follower may lag before it is dropped.
const followBuffer = 8192

// Sub is a follower of new lines.
type Sub struct {
	sel  Selector
	grep *regexp.Regexp
	// C delivers lines; it is closed when the follower fell too far
	// behind (Overflowed) or Unsubscribe was called.
	C          chan Hit
	overflowed bool
}

// Overflowed reports whether C was closed because the follower lagged.
func (s *Sub) Overflowed() bool { return s.overflowed }

// Subscribe follows lines sel and grep select, from now on.
func (s *Store) Subscribe(sel Selector, grep *regexp.Regexp) *Sub {
	sub := &Sub{sel: sel, grep: grep, C: make(chan Hit, followBuffer)}
	s.mu.Lock()
	s.subs[sub] = struct{}{}
	s.mu.Unlock()
	return sub
}

// Unsubscribe stops sub.
func (s *Store) Unsubscribe(sub *Sub) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.subs[sub]; ok {
		delete(s.subs, sub)
		close(sub.C)
	}
}

// publish hands h to every matching follower; s.mu is held.
func (s *Store) publish(h Hit) {
	for sub := range s.subs {
		if !sub.sel.match(&h.Container) || (sub.grep != nil && !sub.grep.Match(h.Line)) {
			continue
		}
		h := h
		h.Line = append([]byte(nil), h.Line...)
		select {
		case sub.C <- h:
		default:
			sub.overflowed = true
			delete(s.subs, sub)
			close(sub.C)
		}
	}
}
