/*
 * version.h: the one version every Rover program reports (`--version`, the
 * daemons' start line and /healthz).
 */
#ifndef RV_VERSION_H
#define RV_VERSION_H

#define ROVER_VERSION "0.1.0"

#endif
