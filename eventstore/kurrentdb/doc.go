// Package kurrentdb is Cairn's event store on KurrentDB (formerly
// EventStoreDB), through github.com/EventStore/EventStore-Client-Go/v4.
package kurrentdb

import _ "github.com/EventStore/EventStore-Client-Go/v4/esdb"
