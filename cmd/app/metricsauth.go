package app

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// How long delegatedAuth remembers a decision, and how many: a scrape every 15 s by each of a
// few Prometheus replicas reviews its token once a minute, not twice a scrape. A denial is kept
// a shorter time, so that a role just granted works soon.
const (
	authAllowTTL    = time.Minute
	authDenyTTL     = 10 * time.Second
	authCacheSize   = 1024
	authCallTimeout = 10 * time.Second
)

// delegatedAuth is the metrics server's filter (metricsserver.Options.FilterProvider): a
// request must carry a bearer token the API server authenticates (TokenReview) and whose user it
// authorizes to use the request's method on its path (SubjectAccessReview on a non-resource
// URL), as on the secure ports of the core components. No token, or one the API server rejects:
// 401; a user without the grant: 403; the API server unreachable: 500.
//
// Not controller-runtime's filters.WithAuthenticationAndAuthorization, which does the same
// through k8s.io/apiserver's delegating authenticator and authorizer: they link cel-go, gRPC
// and OpenTelemetry's exporters (237 more packages), which doubled the binary (37.7 to 74.4 MB)
// and raised the resident memory with 5,000 Nodes and 10,000 VMs from 71 to 107 MiB, over the
// 80-MiB target (BENCHMARKS.md, "Secure metrics without k8s.io/apiserver"). The two reviews
// are two typed client calls; what the library adds beyond them (authenticating requests other
// than by bearer token, CEL authorization) has no use here.
func delegatedAuth(cfg *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	authn, err := authenticationclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	authz, err := authorizationclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	decisions := utilcache.NewLRUExpireCache(authCacheSize)
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			token, ok := bearerToken(r)
			if !ok {
				http.Error(w, "Unauthorized", http.StatusUnauthorized)
				return
			}
			verb := strings.ToLower(r.Method)
			// The token itself is never kept: its hash is the key.
			key := fmt.Sprintf("%x %s %s", sha256.Sum256([]byte(token)), verb, r.URL.Path)
			if d, ok := decisions.Get(key); ok {
				d.(authDecision).answer(w, r, next)
				return
			}
			ctx := r.Context()
			tr, err := authn.TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}},
				metav1.CreateOptions{})
			if err != nil {
				log.Error(err, "Cannot review a metrics request's token with the API server")
				http.Error(w, "Authentication failed", http.StatusInternalServerError)
				return
			}
			if !tr.Status.Authenticated {
				log.V(1).Info("Metrics request with a token the API server rejects", "reason", tr.Status.Error)
				d := authDecision{status: http.StatusUnauthorized, message: "Unauthorized"}
				decisions.Add(key, d, authDenyTTL)
				d.answer(w, r, next)
				return
			}
			u := tr.Status.User
			extra := make(map[string]authorizationv1.ExtraValue, len(u.Extra))
			for k, v := range u.Extra {
				extra[k] = authorizationv1.ExtraValue(v)
			}
			sar, err := authz.SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
				NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: r.URL.Path, Verb: verb},
			}}, metav1.CreateOptions{})
			if err != nil {
				log.Error(err, "Cannot review a metrics request's access with the API server", "user", u.Username)
				http.Error(w, "Authorization failed", http.StatusInternalServerError)
				return
			}
			d := authDecision{status: http.StatusOK}
			ttl := authAllowTTL
			if !sar.Status.Allowed {
				log.V(1).Info("Metrics request denied", "user", u.Username, "path", r.URL.Path, "reason", sar.Status.Reason)
				d = authDecision{status: http.StatusForbidden, message: "Authorization denied for user " + u.Username}
				ttl = authDenyTTL
			}
			decisions.Add(key, d, ttl)
			d.answer(w, r, next)
		}), nil
	}, nil
}

// authDecision is what delegatedAuth decided for a token, method and path.
type authDecision struct {
	status  int // http.StatusOK lets the request through
	message string
}

// answer serves the request or refuses it.
func (d authDecision) answer(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if d.status == http.StatusOK {
		next.ServeHTTP(w, r)
		return
	}
	http.Error(w, d.message, d.status)
}

// bearerToken returns the request's bearer token ("Authorization: Bearer <token>").
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	return token, ok && strings.EqualFold(scheme, "bearer") && token != ""
}
