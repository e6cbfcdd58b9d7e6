"""The MQTT adaptor room (issue 26, in progress): ``edge.py`` MQTT client connections on the
link lifecycle; ``message.py`` maps an MQTT message to the AMQP message the network
carries, and back."""
