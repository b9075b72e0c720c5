package server

import "net/http"

// h2cClient speaks HTTP/2 without TLS (prior knowledge) only.
func h2cClient() *http.Client {
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &protocols}}
}
