package store

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// resumeRaw reads the change kinds replayed after change id from, stopping
// once the stream goes quiet; any line that is not a change is an error.
func (c *Client) resumeRaw(ctx context.Context, id string, from int64) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	resp, err := c.do(ctx, "GET", fmt.Sprintf("/v1/subscriptions/%s?from=%d", id, from), nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var kinds []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var ev rawEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, err
		}
		// A resume with from > 0 carries change events only: a Corrosion
		// client treats any other line as an error, so this reader does too.
		if ev.Change == nil {
			return nil, fmt.Errorf("resume from %d sent a non-change line: %s", from, sc.Bytes())
		}
		ch, err := decodeChange(ev.Change)
		if err != nil {
			return nil, err
		}
		if ch.ChangeID != from+int64(len(kinds))+1 {
			return nil, fmt.Errorf("gap or duplicate: change id %d after %d", ch.ChangeID, from+int64(len(kinds)))
		}
		kinds = append(kinds, ch.ChangeKind)
	}
	return kinds, nil
}
