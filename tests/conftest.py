"""Test-session setup shared by every test.

TensorFlow fixes its device list the first time it runs an op, so the two logical CPU
devices that the `tf.distribute` tests need are configured here, before any test imports
a model. On one device nothing else changes: the default strategy uses `CPU:0`.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf

_cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    _cpu, [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()]
)
