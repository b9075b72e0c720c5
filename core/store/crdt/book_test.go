package crdt

import (
	"bytes"
	"testing"
)

func TestBookDigest(t *testing.T) {
	a := Book{}
	a.Add("s1", 1, 5)
	a.Add("s2", 1, 3)
	b := Book{}
	b.Add("s2", 1, 2)
	b.Add("s1", 1, 5)
	if bytes.Equal(a.Digest(), b.Digest()) {
		t.Fatal("books that differ in one version have the same digest")
	}
	b.Add("s2", 3, 3)
	if !bytes.Equal(a.Digest(), b.Digest()) {
		t.Fatal("books recording the same versions have different digests")
	}
	// Ranges that only add up to the same count are not the same versions.
	c, d := Book{}, Book{}
	c.Add("s1", 1, 2)
	c.Add("s1", 4, 4)
	d.Add("s1", 1, 1)
	d.Add("s1", 3, 4)
	if bytes.Equal(c.Digest(), d.Digest()) {
		t.Fatal("books with different holes have the same digest")
	}
}
