package acme

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/ployz/ployz/sdk/ingress"
)

// VerifyHostname is the hostname check before ordering:
// http://hostname + ingress.VerifyPath?n=NONCE must answer
// ingress.VerifyAnswer(id, NONCE) for the id of one of machines (this
// Cluster's participating Machines), so no order is placed for a name
// that does not reach this Cluster. A fresh nonce each time: an answer
// copied from a Machine does not pass the next check.
func VerifyHostname(ctx context.Context, hostname string, machines []string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	nb := make([]byte, 16)
	if _, err := rand.Read(nb); err != nil {
		return fmt.Errorf("verify nonce: %w", err)
	}
	nonce := hex.EncodeToString(nb)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+hostname+ingress.VerifyPath+"?"+ingress.VerifyNonceParam+"="+nonce, nil)
	if err != nil {
		return err
	}
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(req)
	if err != nil {
		// The status line already names the hostname: say what failed.
		var de *net.DNSError
		var ue *url.Error
		switch {
		case errors.As(err, &de):
			return fmt.Errorf("does not resolve: %s", de.Err)
		case errors.As(err, &ue):
			return fmt.Errorf("%s over HTTP: %w", ingress.VerifyPath, ue.Err)
		}
		return fmt.Errorf("%s over HTTP: %w", ingress.VerifyPath, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	got := strings.ToLower(strings.TrimSpace(string(b)))
	if resp.StatusCode == http.StatusOK && slices.ContainsFunc(machines, func(id string) bool {
		return hmac.Equal([]byte(got), []byte(ingress.VerifyAnswer(id, nonce)))
	}) {
		return nil
	}
	return fmt.Errorf("reaches elsewhere: %s answered %d %q, not a Machine of this Cluster", ingress.VerifyPath, resp.StatusCode, got)
}
