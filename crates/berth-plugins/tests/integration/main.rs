//! berth-plugins' integration tests, one binary: the drivers against real
//! HTTP servers and scripts, the example plugins, and the OpenStack plugins
//! against a stand-in cloud.

mod exec;
mod external;
mod floatingip;
mod openstack;
mod webhook;
