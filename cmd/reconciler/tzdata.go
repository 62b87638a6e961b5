package main

// Rules may use time zones (request.time.getHours('Europe/Paris')); embedding the
// zone database makes them work on hosts without /usr/share/zoneinfo.
import _ "time/tzdata"
