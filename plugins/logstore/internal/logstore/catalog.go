package logstore

import "strings"

// Container is what the store knows of a Container whose output it holds;
// it is kept after Docker removed the Container.
type Container struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Namespace  string `json:"namespace,omitempty"`
	Service    string `json:"service,omitempty"`
	Deployment string `json:"deployment,omitempty"`
	// First and Last are the times of its first and last stored line.
	First int64 `json:"first_unix_nano,omitempty"`
	Last  int64 `json:"last_unix_nano,omitempty"`
	// Removed is when the store saw Docker's files of it gone.
	Removed int64 `json:"removed_unix_nano,omitempty"`
	// EvictedBefore is the end of its newest chunk retention deleted
	// while other lines of its hour were kept, for EvictedReason.
	EvictedBefore int64  `json:"evicted_before_unix_nano,omitempty"`
	EvictedReason string `json:"evicted_reason,omitempty"`
}

// Selector picks Containers; empty fields match all. Container matches a
// Container id prefix (4 characters or more) or its name.
type Selector struct {
	Container  string
	Namespace  string
	Service    string
	Deployment string
}

func (s Selector) match(c *Container) bool {
	if s.Namespace != "" && c.Namespace != s.Namespace {
		return false
	}
	if s.Service != "" && c.Service != s.Service {
		return false
	}
	if s.Deployment != "" && c.Deployment != s.Deployment && !(len(s.Deployment) >= 4 && strings.HasPrefix(c.Deployment, s.Deployment)) {
		return false
	}
	if s.Container != "" && c.Name != s.Container && !(len(s.Container) >= 4 && strings.HasPrefix(c.ID, s.Container)) {
		return false
	}
	return true
}
