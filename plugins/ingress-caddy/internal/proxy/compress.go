package proxy

import (
	"compress/gzip"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// minCompress is the smallest declared body worth compressing: below it
// the gzip framing costs more than it saves.
const minCompress = 256

// compressible reports whether a route with compress on should gzip res
// on its way to the client: the client accepts gzip, the Container did not
// encode it already, it has a body of a textual type (event streams and
// ranges are left alone) and it is not known to be tiny.
func compressible(res *http.Response) bool {
	switch {
	case res.Request.Method == http.MethodHead, res.StatusCode < 200, res.StatusCode == http.StatusNoContent,
		res.StatusCode == http.StatusNotModified, res.StatusCode == http.StatusPartialContent:
		return false
	case res.Header.Get("Content-Encoding") != "", res.Header.Get("Content-Range") != "",
		res.ContentLength >= 0 && res.ContentLength < minCompress:
		return false
	}
	return acceptsGzip(res.Request.Header.Values("Accept-Encoding")) && textual(res.Header.Get("Content-Type"))
}

// acceptsGzip reports whether Accept-Encoding values name gzip (or *)
// without q=0.
func acceptsGzip(values []string) bool {
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			coding = strings.ToLower(strings.TrimSpace(coding))
			if coding != "gzip" && coding != "*" {
				continue
			}
			q := 1.0
			for _, param := range strings.Split(params, ";") {
				if k, v, _ := strings.Cut(strings.TrimSpace(param), "="); strings.EqualFold(k, "q") {
					q, _ = strconv.ParseFloat(v, 64) // unparsable: 0, refused
				}
			}
			return q > 0
		}
	}
	return false
}

// textual reports whether a Content-Type is worth compressing: text
// (not an event stream, which must reach the client event by event),
// JSON, XML, JavaScript, SVG and WebAssembly.
func textual(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	switch {
	case mt == "text/event-stream":
		return false
	case strings.HasPrefix(mt, "text/"), strings.HasSuffix(mt, "+json"), strings.HasSuffix(mt, "+xml"):
		return true
	}
	switch mt {
	case "application/json", "application/javascript", "application/xml", "image/svg+xml", "application/wasm":
		return true
	}
	return false
}

// compressResponse gzips res's body: the length becomes unknown, the
// answer varies with Accept-Encoding, and a strong ETag turns weak (the
// bytes differ from the Container's).
func compressResponse(res *http.Response) {
	res.Header.Del("Content-Length")
	res.ContentLength = -1
	res.Header.Set("Content-Encoding", "gzip")
	res.Header.Add("Vary", "Accept-Encoding")
	if et := res.Header.Get("ETag"); et != "" && !strings.HasPrefix(et, "W/") {
		res.Header.Set("ETag", "W/"+et)
	}
	res.Body = gzipBody(res.Body)
}

var gzipWriters = sync.Pool{New: func() any { w, _ := gzip.NewWriterLevel(io.Discard, gzip.DefaultCompression); return w }}

// gzipBody is body gzipped as it is read. Each chunk the Container sent
// is flushed through, so an answer that streams still streams.
func gzipBody(body io.ReadCloser) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		zw := gzipWriters.Get().(*gzip.Writer)
		zw.Reset(pw)
		defer gzipWriters.Put(zw)
		buf := make([]byte, 32<<10)
		for {
			n, err := body.Read(buf)
			if n > 0 {
				if _, werr := zw.Write(buf[:n]); werr != nil {
					pw.CloseWithError(werr)
					return
				}
				if werr := zw.Flush(); werr != nil {
					pw.CloseWithError(werr)
					return
				}
			}
			if err == io.EOF {
				pw.CloseWithError(zw.Close())
				return
			}
			if err != nil {
				pw.CloseWithError(err)
				return
			}
		}
	}()
	return gzipReader{PipeReader: pr, body: body}
}

// gzipReader closes both ends: the pipe (so the compressing goroutine's
// next write fails) and the Container's body (so a read it waits in
// returns).
type gzipReader struct {
	*io.PipeReader
	body io.ReadCloser
}

func (g gzipReader) Close() error {
	g.PipeReader.Close()
	return g.body.Close()
}
