/* bcg/version.h - the version of libbcg and the bcg command. */
#ifndef BCG_VERSION_H
#define BCG_VERSION_H

#define BCG_VERSION "0.1.0"
#define BCG_VERSION_MAJOR 0
#define BCG_VERSION_MINOR 1
#define BCG_VERSION_PATCH 0

#endif
