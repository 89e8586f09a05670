// Package common holds what the three node controllers share: the Node cache trimming, the
// Node indexes, the sources that turn XO inventory changes and the periodic resync into
// reconcile requests, the registration, the reconcile loggers, the optimistic-lock patches, and
// the retry timing.
package common
