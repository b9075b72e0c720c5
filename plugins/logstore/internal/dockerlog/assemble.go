package dockerlog

// MaxLine bounds one reassembled line held in memory; a longer line is
// handed on in pieces of this size.
const MaxLine = 1 << 20

// Line is one whole line of a Container's output.
type Line struct {
	Source   string
	TimeNano int64 // of the line's first record
	Text     []byte
}

// Assembler joins partial records (Docker splits a line longer than
// 16 KiB, and marks a last line without a newline as partial) into lines,
// per source. Its zero value is ready.
type Assembler struct {
	pending map[string]*Line
}

// Add takes one record and returns the lines it completes (none, one, or
// a piece of an over-long line).
func (a *Assembler) Add(e Entry) []Line {
	p := a.pending[e.Source]
	if p == nil && e.Complete() {
		return []Line{{Source: e.Source, TimeNano: e.TimeNano, Text: append([]byte(nil), e.Line...)}}
	}
	if p == nil {
		if a.pending == nil {
			a.pending = map[string]*Line{}
		}
		p = &Line{Source: e.Source, TimeNano: e.TimeNano}
		a.pending[e.Source] = p
	}
	p.Text = append(p.Text, e.Line...)
	var out []Line
	for len(p.Text) > MaxLine {
		out = append(out, Line{Source: p.Source, TimeNano: p.TimeNano, Text: p.Text[:MaxLine:MaxLine]})
		p.Text = append([]byte(nil), p.Text[MaxLine:]...)
	}
	if e.Complete() {
		delete(a.pending, e.Source)
		out = append(out, *p)
	}
	return out
}

// Flush returns the lines still waiting for their end: at the end of a
// Container's output, a last line without a newline.
func (a *Assembler) Flush() []Line {
	var out []Line
	for _, s := range []string{"stdout", "stderr"} {
		if p := a.pending[s]; p != nil {
			out = append(out, *p)
		}
	}
	a.pending = nil
	return out
}

// Pending reports whether a line is waiting for its end.
func (a *Assembler) Pending() bool { return len(a.pending) > 0 }
