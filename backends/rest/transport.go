package rest

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/csi-gateway/csi-gateway/backends"
)

// transportKind sorts the ways an attempt can fail before any HTTP answer arrives.
type transportKind int

const (
	kindOther       transportKind = iota // anything else
	kindRefused                          // nothing listens at the address
	kindDNS                              // the host name does not resolve
	kindClosed                           // the connection ended before the answer (EOF, reset)
	kindTimeout                          // no answer in time
	kindCert                             // the appliance's certificate was not accepted
	kindCertRefused                      // the appliance refused the gateway's certificate
	kindNotTLS                           // an https:// URL answered in plain HTTP
	kindCredentials                      // a credentials file (auth) cannot be read
)

// transportKindOf sorts err, the error of an http.Client call that got no answer.
func transportKindOf(err error) transportKind {
	var (
		certErr    *tls.CertificateVerificationError
		unknownCA  x509.UnknownAuthorityError
		hostErr    x509.HostnameError
		invalidErr x509.CertificateInvalidError
		recordErr  tls.RecordHeaderError
		opErr      *net.OpError
		credErr    *credentialsError
		dnsErr     *net.DNSError
		netErr     net.Error
	)
	switch {
	case errors.As(err, &credErr):
		return kindCredentials
	case errors.As(err, &certErr), errors.As(err, &unknownCA), errors.As(err, &hostErr), errors.As(err, &invalidErr):
		return kindCert
	case errors.As(err, &recordErr), strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return kindNotTLS
	case errors.As(err, &opErr) && opErr.Op == "remote error" && strings.Contains(opErr.Err.Error(), "certificate"):
		return kindCertRefused // a TLS alert such as "bad certificate" or "certificate required"
	case errors.As(err, &dnsErr):
		return kindDNS
	case errors.Is(err, syscall.ECONNREFUSED):
		return kindRefused
	case errors.As(err, &netErr) && netErr.Timeout():
		return kindTimeout
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNABORTED):
		return kindClosed
	}
	return kindOther
}

// transportError classifies err, the error of an attempt to the appliance at display that
// got no answer, while the caller's context was still live. attemptTimeout is the limit of
// one attempt when the caller set no deadline, zero otherwise. TLS and connection failures
// are ClassUnavailable (never internal: they are not final for the CSI caller); a timeout
// is ClassDeadline.
func transportError(name, m, display string, err error, attemptTimeout time.Duration) *backends.Error {
	class, msg := describeTransport(name, display, err, attemptTimeout)
	e := newError(class, name, m, msg)
	e.Cause = withoutURL(err)
	return e
}

// withoutURL returns the error inside a *url.Error, which repeats the request's URL.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// describeTransport is transportError's class and message, without the prefix.
func describeTransport(name, display string, err error, attemptTimeout time.Duration) (backends.Class, string) {
	why := Clean(withoutURL(err).Error(), maxSaid) // display is what may be shown of the URL
	var msg string
	class := backends.ClassUnavailable
	switch transportKindOf(err) {
	case kindRefused:
		msg = fmt.Sprintf("cannot connect to %s (%s); check that the appliance is running and listening there, and backends.%s.urls", display, why, name)
	case kindDNS:
		msg = fmt.Sprintf("cannot resolve the host of %s (%s); check backends.%s.urls and the gateway's DNS", display, why, name)
	case kindClosed:
		msg = fmt.Sprintf("the connection to %s ended before the appliance answered (%s); the appliance or a proxy in front of it may have restarted", display, why)
	case kindTimeout:
		class = backends.ClassDeadline
		msg = fmt.Sprintf("%s did not answer in time (%s)", display, why)
		if attemptTimeout > 0 {
			msg += fmt.Sprintf("; one attempt may take %v when the caller sets no deadline (backends.%s.requestTimeout)", attemptTimeout, name)
		}
	case kindCert:
		msg = fmt.Sprintf("TLS with %s failed: %s; %s", display, why, certHint(name, err))
	case kindCertRefused:
		msg = fmt.Sprintf("TLS with %s failed: the appliance refused the gateway's client certificate (%s); check backends.%s.tls.cert and backends.%s.tls.key",
			display, why, name, name)
	case kindNotTLS:
		msg = fmt.Sprintf("%s did not answer in TLS (%s); use http:// in backends.%s.urls, or enable TLS on the appliance", display, why, name)
	case kindCredentials:
		msg = fmt.Sprintf("no request sent to %s: cannot read the credentials: %s", display, why)
	default:
		msg = fmt.Sprintf("cannot reach %s: %s", display, why)
	}
	return class, msg
}

// certHint says what to check about a certificate the gateway did not accept.
func certHint(name string, err error) string {
	var (
		hostErr    x509.HostnameError
		invalidErr x509.CertificateInvalidError
	)
	switch {
	case errors.As(err, &hostErr):
		return fmt.Sprintf("the appliance's certificate must name the host in backends.%s.urls", name)
	case errors.As(err, &invalidErr) && invalidErr.Reason == x509.Expired:
		return "check the validity dates of the appliance's certificate and the gateway's clock"
	}
	return fmt.Sprintf("check that backends.%s.tls.ca holds the CA that signed the appliance's certificate", name)
}
