// PLACEHOLDER: the sklearn importer's tests land with the importer.
#include <gtest/gtest.h>
